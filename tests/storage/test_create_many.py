"""Creating a topic of many partitions at once (issue 14): the same files as the partitions made
one by one, and a crash in the middle of it leaves a store that opens.

``Store.create_topic`` makes one directory per partition and no file (design.md §6.1, "Topic
creation"): each Log writes its ``partition.metadata`` with its first flush, before any of its
records is durable (Kafka's lazy ``PartitionMetadataFile``). The reference here is the path it
replaced, rebuilt from the store's own one-partition steps: ``_open_topic`` (``os.makedirs``,
``Log.open``) with the first segment made by ``Segment.open(create=True)``. A crash at any
point, before or after ``create_topic`` returned, must leave every partition with the topic's
one id once it holds a record.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import pytest

import seglog
from seglog import filenames
from seglog.storage import checkpoints
from seglog.storage.config import LogConfig
from seglog.storage.local_log import LocalLog
from seglog.store import TOPICS_FILE, Store

OFFSETS_PARTITIONS = 2
MANY_PARTITIONS = 300
CRASH_PARTITIONS = 20
TOPIC_ID = uuid.UUID("0b7e4a1c-52d2-4c7f-9a44-3f1f1c6e2a01")
SRC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(seglog.__file__)))
CHILD_TIMEOUT_S = 120
TIMESTAMP_MS = 1_700_000_000_000


def _walk(root):
    """Every file under ``root`` as ``{relative path: path}`` (meta.properties, which holds
    the time it was written, left out)."""
    out = {}
    for dir_path, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(dir_path, name)
            rel = os.path.relpath(path, root)
            if rel != filenames.META_PROPERTIES:
                out[rel] = path
    return out


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _create_one_by_one(store, name, partitions, monkeypatch):
    """The creation path before issue 14: per partition a directory, an atomically written
    partition.metadata and a Log whose first segment is ``Segment.open(create=True)``."""
    with monkeypatch.context() as m:
        m.setattr(LocalLog, "create_empty_segment",
                  lambda self, base: self.open_segment(base, create=True))
        topic = store._logs._open_topic(name, partitions, LogConfig(), TOPIC_ID)
    store._logs._topics[name] = topic
    store._logs.write_registry()
    return topic


def test_many_partitions_make_the_files_of_one_by_one(tmp_path, backend, monkeypatch):
    monkeypatch.setattr(checkpoints, "new_kafka_uuid", lambda: TOPIC_ID)
    batched, single = tmp_path / "batched", tmp_path / "single"
    a = Store(batched, backend=backend.name, offsets_topic_partitions=OFFSETS_PARTITIONS)
    b = Store(single, backend=backend.name, offsets_topic_partitions=OFFSETS_PARTITIONS)
    try:
        topic = a.create_topic("t", partitions=MANY_PARTITIONS)
        assert topic.topic_id == checkpoints.uuid_to_kafka_str(TOPIC_ID)
        _create_one_by_one(b, "t", MANY_PARTITIONS, monkeypatch)
        files_a, files_b = _walk(batched), _walk(single)
        # The first segment's files are made by its first use (design.md §7), not by the
        # creation: everything else is the same.
        segment_files = [f for f in files_a if filenames.parse_segment_file(
            os.path.basename(f)) is not None and f.startswith("t-")]
        assert segment_files == []
        files_b = {rel: path for rel, path in files_b.items()
                   if not (rel.startswith("t-")
                           and filenames.parse_segment_file(os.path.basename(rel)))}
        assert sorted(files_a) == sorted(files_b)
        # partition.metadata waits for each Log's first flush (Kafka's maybeFlush).
        assert [f for f in files_a if f.endswith(filenames.PARTITION_METADATA)] == []
        for rel in files_a:
            assert _read(files_a[rel]) == _read(files_b[rel]), rel
        for p in range(MANY_PARTITIONS):
            assert topic.log(p).append(f"v{p}".encode(), timestamp_ms=TIMESTAMP_MS) == 0
            b.topic("t").log(p).append(f"v{p}".encode(), timestamp_ms=TIMESTAMP_MS)
    finally:
        a.close()
        b.close()
    files_a, files_b = _walk(batched), _walk(single)
    assert sorted(files_a) == sorted(files_b)
    assert len([f for f in files_a if f.endswith(filenames.PARTITION_METADATA)]) \
        == MANY_PARTITIONS  # every partition got a record, so its close flushed the file
    for rel in files_a:  # closed: indexes trimmed, checkpoints and registry written
        assert _read(files_a[rel]) == _read(files_b[rel]), rel


def _metadata_path(root, p, topic="t"):
    return os.path.join(root, filenames.partition_dir_name(topic, p), filenames.PARTITION_METADATA)


def _metadata_id(root, p):
    """The topic id text partition ``p``'s partition.metadata names, or None if missing."""
    found = checkpoints.PartitionMetadataFile(_metadata_path(root, p)).read()
    return None if found is None else checkpoints.uuid_to_kafka_str(found)


def test_create_topic_makes_no_file_and_the_first_flush_writes_partition_metadata_once(
        tmp_path, backend, monkeypatch):
    """Kafka's PartitionMetadataFile: recorded at creation, written by the first flush that
    syncs anything, before that flush's data and its directory fsync; once per partition; a
    partition that never holds a record writes none, not even at close."""
    writes, events = [], []
    real_write = checkpoints.PartitionMetadataFile.write
    monkeypatch.setattr(checkpoints.PartitionMetadataFile, "write",
                        lambda self, topic_id, **k: (writes.append(self.path),
                                                     real_write(self, topic_id, **k)))
    real_flush = LocalLog.flush

    def flush(self, end_offset, *, now_ms):
        if self.has_unsynced(end_offset):
            # The file is whole on disk (fsynced, renamed) before the data is synced.
            events.append((self.dir_path, os.path.exists(
                os.path.join(self.dir_path, filenames.PARTITION_METADATA))))
        return real_flush(self, end_offset, now_ms=now_ms)

    monkeypatch.setattr(LocalLog, "flush", flush)
    real_fsync_dir = checkpoints.fsync_dir
    synced_dirs = []
    monkeypatch.setattr(checkpoints, "fsync_dir",
                        lambda d: (synced_dirs.append(os.fspath(d)), real_fsync_dir(d)))
    with Store(tmp_path, backend=backend.name,
               offsets_topic_partitions=OFFSETS_PARTITIONS) as store:
        topic = store.create_topic("t", partitions=5)
        for p in range(5):
            dir_path = tmp_path / filenames.partition_dir_name("t", p)
            assert os.listdir(dir_path) == []
            assert topic.log(p).partition_metadata_pending
        log = topic.log(1)
        log.append(b"a", timestamp_ms=TIMESTAMP_MS)
        assert _metadata_id(tmp_path, 1) is None  # appended, not flushed: not yet
        log.flush()
        assert _metadata_id(tmp_path, 1) == topic.topic_id
        assert not log.partition_metadata_pending
        assert events == [(log.dir_path, True)]
        assert log.dir_path in synced_dirs  # the rename made durable by the flush's fsync
        log.append(b"b", timestamp_ms=TIMESTAMP_MS)
        log.flush()
        topic.log(3).append(b"c", timestamp_ms=TIMESTAMP_MS)
    assert sorted(writes) == [_metadata_path(tmp_path, 1), _metadata_path(tmp_path, 3)]
    for p in range(5):
        dir_path = tmp_path / filenames.partition_dir_name("t", p)
        assert not any(n.endswith(checkpoints.TMP_SUFFIX) for n in os.listdir(dir_path))
        assert _metadata_id(tmp_path, p) == (topic.topic_id if p in (1, 3) else None)
    # A reopen writes nothing either: the partitions without the file get the registry's id.
    writes.clear()
    with Store(tmp_path, backend=backend.name,
               offsets_topic_partitions=OFFSETS_PARTITIONS) as store:
        again = store.topic("t")
        assert again.topic_id == topic.topic_id
        assert [again.log(p).partition_metadata_pending for p in range(5)] == \
            [True, False, True, False, True]
        assert writes == []
        again.log(4).append(b"d", timestamp_ms=TIMESTAMP_MS)
    assert writes == [_metadata_path(tmp_path, 4)]
    assert _metadata_id(tmp_path, 4) == topic.topic_id
    with Store(tmp_path, backend=backend.name, read_only=True) as store:
        assert store.topic("t").topic_id == topic.topic_id
        assert store.topic("t").end_offsets() == {0: 0, 1: 2, 2: 0, 3: 1, 4: 1}


def test_create_partitions_writes_partition_metadata_with_the_first_flush(tmp_path, backend):
    with Store(tmp_path, backend=backend.name,
               offsets_topic_partitions=OFFSETS_PARTITIONS) as store:
        topic = store.create_topic("t", partitions=1)
        store.create_partitions("t", 3)
        assert os.listdir(tmp_path / filenames.partition_dir_name("t", 2)) == []
        topic.log(2).append(b"x", timestamp_ms=TIMESTAMP_MS)
        topic.log(2).flush()
        assert _metadata_id(tmp_path, 2) == topic.topic_id
        assert _metadata_id(tmp_path, 1) is None


# --- a crash in the middle ----------------------------------------------------------------------

_CHILD = r"""
import os, sys
from seglog import log_manager as log_manager_mod, store as store_mod
from seglog.storage import checkpoints

path, backend, step, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
half = partitions // 2

def die():
    os._exit(17)

if step == "after_mkdirs":
    store_mod.Log.open = lambda *a, **k: die()
elif step == "mid_logs":
    log_open, count = store_mod.Log.open, [0]
    def counting_open(*a, **k):
        count[0] += 1
        if count[0] > half:
            die()
        return log_open(*a, **k)
    store_mod.Log.open = counting_open
elif step == "before_registry":
    log_manager_mod.LogManager.write_registry = lambda self, **k: die()
s = store_mod.Store(path, backend=backend, offsets_topic_partitions=2)
topic = s.create_topic("t", partitions=partitions, config={"retention.ms": "1000000"})
if step.startswith("after_create"):
    # create_topic returned: every partition gets an acknowledged record; some are flushed
    # (their partition.metadata written then), the rest only in the page cache.
    for p in range(partitions):
        topic.log(p).append(b"before the crash")
    if step == "after_create_mid_flushes":
        for p in range(half):
            topic.log(p).flush()
        # A crash between a .tmp's write and its rename leaves the .tmp, torn.
        with open(os.path.join(topic.log(half).dir_path, "partition.metadata.tmp"), "wb") as f:
            f.write(b"version: 0\ntopic")
    sys.stdout.write(topic.topic_id)
    sys.stdout.flush()
    die()
os._exit(0)
"""

CRASH_STEPS = ["after_mkdirs", "mid_logs", "before_registry"]


def _crash_during_create(path, backend_name, step):
    env = dict(os.environ, PYTHONPATH=SRC_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", _CHILD, str(path), backend_name, step,
                             str(CRASH_PARTITIONS)],
                            env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert result.returncode == 17, result.stderr
    return result.stdout


def _check_topic_works(path, backend_name, *, before=()):
    """The half-created topic opens whole: every partition, one topic id, writable; ``before``
    is what each partition held before the crash. Returns the topic id."""
    expected = [*before, b"after the crash"]
    with Store(path, backend=backend_name, offsets_topic_partitions=OFFSETS_PARTITIONS) as store:
        topic = store.topic("t")
        assert topic.partitions == CRASH_PARTITIONS
        for p in range(CRASH_PARTITIONS):
            found = _metadata_id(path, p)
            assert found in (None, topic.topic_id)
            log = topic.log(p)
            assert log.partition_metadata_pending == (found is None)
            offset = log.append(b"after the crash")
            assert offset == len(before)
            assert [r.value for r in log.records()] == expected
        topic_id = topic.topic_id
    for p in range(CRASH_PARTITIONS):  # each got a record: the close wrote every file
        assert _metadata_id(path, p) == topic_id
    with Store(path, backend=backend_name, offsets_topic_partitions=OFFSETS_PARTITIONS) as store:
        assert store.topic("t").topic_id == topic_id
        assert store.topic("t").end_offsets() == {p: len(expected)
                                                  for p in range(CRASH_PARTITIONS)}
    return topic_id


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_a_crash_mid_creation_leaves_a_store_that_opens(tmp_path, backend, step):
    path = tmp_path / "store"
    _crash_during_create(path, backend.name, step)
    found = [n for n in os.listdir(path) if n.startswith("t-")]
    assert len(found) == CRASH_PARTITIONS  # every directory is made before any file
    _check_topic_works(str(path), backend.name)


@pytest.mark.parametrize("step", ["after_create_unflushed", "after_create_mid_flushes"])
def test_a_crash_after_create_returned_keeps_the_topic_id_of_acknowledged_records(
        tmp_path, backend, step):
    """create_topic returned, then records were acknowledged (appended) to every partition
    and the process died: with no partition.metadata written (nothing flushed), with half of
    them written by a flush, and with a torn .tmp left by a crash mid-write. Every partition
    keeps the topic's id (the registry's, written before create_topic returned) and its
    records; a process crash keeps the page cache."""
    path = tmp_path / "store"
    topic_id = _crash_during_create(path, backend.name, step)
    half = CRASH_PARTITIONS // 2
    written = [_metadata_id(path, p) for p in range(CRASH_PARTITIONS)]
    if step == "after_create_unflushed":
        assert written == [None] * CRASH_PARTITIONS
    else:
        assert written == [topic_id] * half + [None] * (CRASH_PARTITIONS - half)
        assert os.path.exists(_metadata_path(path, half) + checkpoints.TMP_SUFFIX)
    assert _check_topic_works(str(path), backend.name, before=[b"before the crash"]) \
        == topic_id
    assert not os.path.exists(_metadata_path(path, half) + checkpoints.TMP_SUFFIX)


def test_a_partition_metadata_naming_another_topic_is_refused_by_the_log(tmp_path, backend):
    """Log.open(topic_id=...) on a directory whose file names another id: Kafka's
    InconsistentTopicIdException, here CorruptCheckpointError; the same id writes nothing."""
    from seglog.errors import CorruptCheckpointError
    from seglog.storage.log import Log

    path = tmp_path / "t-0"
    path.mkdir()
    other = uuid.UUID("11111111-2222-4333-8444-555555555555")
    checkpoints.PartitionMetadataFile(path / filenames.PARTITION_METADATA).write(other)
    with pytest.raises(CorruptCheckpointError, match="names topic id"):
        Log.open(path, backend=backend.name, topic_id=TOPIC_ID)
    with Log.open(path, backend=backend.name, topic_id=other) as log:
        assert not log.partition_metadata_pending
    with pytest.raises(ValueError):
        Log.open(path, backend=backend.name, topic_id=checkpoints.ZERO_UUID)
    with pytest.raises(TypeError):
        Log.open(path, backend=backend.name, topic_id=str(other))
    with pytest.raises(FileNotFoundError):
        Log.open(tmp_path / "missing", backend=backend.name, create_directory=False)
    assert not (tmp_path / "missing").exists()


def test_a_topic_missing_files_after_a_crash_takes_the_id_a_partition_kept(tmp_path, backend):
    """An OS crash may lose any entry not yet synced: partition 0 losing its
    partition.metadata while others kept theirs must not give the topic two ids (the open
    would refuse them), a partition without segment files gets an empty one, and a lost
    directory in the middle is made again."""
    path = tmp_path / "store"
    with Store(path, backend=backend.name,
               offsets_topic_partitions=OFFSETS_PARTITIONS) as store:
        topic_id = store.create_topic("t", partitions=CRASH_PARTITIONS).topic_id
    os.remove(path / TOPICS_FILE)  # the registry write never happened
    for p in range(CRASH_PARTITIONS):  # but most partitions' first flushes did
        if p not in (0, 3):
            checkpoints.PartitionMetadataFile(_metadata_path(path, p)).write(
                checkpoints.uuid_from_kafka_str(topic_id))
    for name in os.listdir(path / filenames.partition_dir_name("t", 5)):
        if name.endswith((".log", ".index", ".timeindex")):
            os.remove(path / filenames.partition_dir_name("t", 5) / name)
    shutil.rmtree(path / filenames.partition_dir_name("t", 7))  # a lost directory entry
    _check_topic_works(str(path), backend.name)
    with Store(path, backend=backend.name, read_only=True) as store:
        assert store.topic("t").topic_id == topic_id


def test_closing_new_partitions_writes_the_log_start_checkpoint_once(tmp_path, backend,
                                                                     monkeypatch):
    """Each new partition's first save must not rewrite the shared checkpoint of every
    partition (quadratic in partitions): Store.close writes it once, with every entry."""
    writes = []
    store = Store(tmp_path, backend=backend.name, offsets_topic_partitions=OFFSETS_PARTITIONS)
    try:
        store.create_topic("t", partitions=50)
        checkpoint = store._logs.dirs[0].log_start_checkpoint  # one data dir: its file
        real_write = checkpoint.write
        monkeypatch.setattr(checkpoint, "write",
                            lambda offsets: (writes.append(dict(offsets)), real_write(offsets)))
    finally:
        store.close()
    assert len(writes) == 1
    assert writes[0] == {("t", p): 0 for p in range(50)}
    assert checkpoints.OffsetCheckpointFile(
        tmp_path / filenames.LOG_START_OFFSET_CHECKPOINT).read() == writes[0]
