"""Creating a topic of many partitions at once (issue 14): the same files as the partitions made
one by one, and a crash in the middle of it leaves a store that opens.

``Store.create_topic`` batches its durable steps (design.md §6.1, "Topic creation"). The
reference here is the path it replaced, rebuilt from the store's own one-partition steps:
``_open_topic`` (``os.makedirs``, ``PartitionMetadataFile.write``, ``Log.open``) with the first
segment made by ``Segment.open(create=True)``.
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
        topic = store._open_topic(name, partitions, LogConfig(), TOPIC_ID, create=False)
    store._topics[name] = topic
    store._write_registry()
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
        assert len([f for f in files_a if f.endswith(filenames.PARTITION_METADATA)]) \
            == MANY_PARTITIONS
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
    for rel in files_a:  # closed: indexes trimmed, checkpoints and registry written
        assert _read(files_a[rel]) == _read(files_b[rel]), rel


def test_create_topic_writes_each_partition_metadata_once_and_leaves_no_tmp(tmp_path, backend):
    with Store(tmp_path, backend=backend.name,
               offsets_topic_partitions=OFFSETS_PARTITIONS) as store:
        topic = store.create_topic("t", partitions=5)
        for p in range(5):
            dir_path = tmp_path / filenames.partition_dir_name("t", p)
            assert checkpoints.PartitionMetadataFile(
                dir_path / filenames.PARTITION_METADATA).read() == checkpoints.uuid_from_kafka_str(topic.topic_id)
            assert not any(n.endswith(checkpoints.TMP_SUFFIX) for n in os.listdir(dir_path))


def test_atomic_write_many_replaces_every_file(tmp_path):
    files = {str(tmp_path / f"f{i}"): f"content {i}".encode() for i in range(20)}
    (tmp_path / "f3").write_bytes(b"old")
    checkpoints.atomic_write_many(files)
    for path, data in files.items():
        assert _read(path) == data
    assert sorted(os.listdir(tmp_path)) == sorted(f"f{i}" for i in range(20))


def test_fsync_all_raises_for_a_missing_path_after_syncing_the_rest(tmp_path):
    (tmp_path / "a").write_bytes(b"x")
    with pytest.raises(FileNotFoundError):
        checkpoints.fsync_all([tmp_path / "a", tmp_path / "missing", tmp_path])


# --- a crash in the middle ----------------------------------------------------------------------

_CHILD = r"""
import os, sys
from seglog import store as store_mod
from seglog.storage import checkpoints

path, backend, step, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
half = partitions // 2

def die():
    os._exit(17)

if step == "after_mkdirs":
    checkpoints.atomic_write_many = lambda *a, **k: die()
elif step == "mid_renames":
    replace, count = os.replace, [0]
    def counting_replace(src, dst):
        if str(dst).endswith("partition.metadata"):
            count[0] += 1
            if count[0] > half:
                die()
        replace(src, dst)
    os.replace = counting_replace
elif step == "mid_logs":
    log_open, count = store_mod.Log.open, [0]
    def counting_open(*a, **k):
        count[0] += 1
        if count[0] > half:
            die()
        return log_open(*a, **k)
    store_mod.Log.open = counting_open
elif step == "before_registry":
    store_mod.Store._write_registry = lambda self, **k: die()
s = store_mod.Store(path, backend=backend, offsets_topic_partitions=2)
s.create_topic("t", partitions=partitions, config={"retention.ms": "1000000"})
os._exit(0)
"""

CRASH_STEPS = ["after_mkdirs", "mid_renames", "mid_logs", "before_registry"]


def _crash_during_create(path, backend_name, step):
    env = dict(os.environ, PYTHONPATH=SRC_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", _CHILD, str(path), backend_name, step,
                             str(CRASH_PARTITIONS)],
                            env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    assert result.returncode == 17, result.stderr


def _check_topic_works(path, backend_name):
    """The half-created topic opens whole: every partition, one topic id, writable."""
    with Store(path, backend=backend_name, offsets_topic_partitions=OFFSETS_PARTITIONS) as store:
        topic = store.topic("t")
        assert topic.partitions == CRASH_PARTITIONS
        for p in range(CRASH_PARTITIONS):
            metadata = checkpoints.PartitionMetadataFile(os.path.join(
                path, filenames.partition_dir_name("t", p), filenames.PARTITION_METADATA))
            assert checkpoints.uuid_to_kafka_str(metadata.read()) == topic.topic_id
            log = topic.log(p)
            offset = log.append(b"after the crash")
            assert offset == 0
            assert [r.value for r in log.records()] == [b"after the crash"]
        topic_id = topic.topic_id
    with Store(path, backend=backend_name, offsets_topic_partitions=OFFSETS_PARTITIONS) as store:
        assert store.topic("t").topic_id == topic_id
        assert store.topic("t").end_offsets() == {p: 1 for p in range(CRASH_PARTITIONS)}


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_a_crash_mid_creation_leaves_a_store_that_opens(tmp_path, backend, step):
    path = tmp_path / "store"
    _crash_during_create(path, backend.name, step)
    found = [n for n in os.listdir(path) if n.startswith("t-")]
    assert len(found) == CRASH_PARTITIONS  # every directory is made before any file
    _check_topic_works(str(path), backend.name)


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
    for p in (0, 3):
        os.remove(path / filenames.partition_dir_name("t", p) / filenames.PARTITION_METADATA)
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
        real_write = store._log_start_checkpoint.write
        monkeypatch.setattr(store._log_start_checkpoint, "write",
                            lambda offsets: (writes.append(dict(offsets)), real_write(offsets)))
    finally:
        store.close()
    assert len(writes) == 1
    assert writes[0] == {("t", p): 0 for p in range(50)}
    assert checkpoints.OffsetCheckpointFile(
        tmp_path / filenames.LOG_START_OFFSET_CHECKPOINT).read() == writes[0]


def test_atomic_write_many_on_one_file_system_replaces_every_file(tmp_path):
    """The syncfs path (from SYNCFS_FILES_MIN files on): the same files as the fsync path."""
    count = checkpoints.SYNCFS_FILES_MIN + 3
    dirs = [tmp_path / f"d{i}" for i in range(count)]
    for d in dirs:
        d.mkdir()
    files = {str(d / "f"): f"content {i}".encode() for i, d in enumerate(dirs)}
    (dirs[0] / "f").write_bytes(b"old")
    checkpoints.atomic_write_many(files, one_file_system=True)
    for path, data in files.items():
        assert _read(path) == data
    assert all(os.listdir(d) == ["f"] for d in dirs)
    assert checkpoints.syncfs(tmp_path) is True  # Linux: the C library has syncfs
    with pytest.raises(FileNotFoundError):
        checkpoints.syncfs(tmp_path / "missing")
