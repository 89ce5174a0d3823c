"""Several data directories (JBOD, Kafka's ``log.dirs`` with several entries) on both
backends: placement, per-dir files, restart, and a failed dir taking only its partitions
offline."""

from __future__ import annotations

import os
import shutil

import pytest

from seglog import Store
from seglog.errors import KafkaStorageError, PartitionOfflineError
from seglog.storage import checkpoints
from seglog.types import TopicPartition


def _dirs(tmp_path):
    return str(tmp_path / "a"), str(tmp_path / "b")


def _open(backend, a, b, **kwargs):
    return Store(a, backend=backend, extra_log_dirs=[b], offsets_topic_partitions=1, **kwargs)


def _held(store):
    return {os.path.basename(d.path): sorted(f"{tp.topic}-{tp.partition}" for tp in d.partitions)
            for d in store.log_dirs()}


def test_partitions_spread_over_the_dirs_and_each_dir_keeps_its_own_files(backend, tmp_path):
    a, b = _dirs(tmp_path)
    with _open(backend, a, b) as store:
        store.create_topic("t", 4)
        store.create_topic("u", 1)
        # Kafka's nextLogDirs: each new partition in the dir holding the fewest.
        assert _held(store) == {"a": ["t-0", "t-2", "u-0"], "b": ["t-1", "t-3"]}
        for p in range(4):
            store.topic("t").log(p).append(f"v{p}".encode())
        assert store.log_dir_of(("t", 1)) == b
        store.flush()
    for d, mine in ((a, {("t", 0), ("t", 2), ("u", 0)}), (b, {("t", 1), ("t", 3)})):
        for p in range(4):
            assert os.path.isdir(os.path.join(d, f"t-{p}")) == (("t", p) in mine)
        assert set(checkpoints.OffsetCheckpointFile(
            os.path.join(d, "recovery-point-offset-checkpoint")).read()) == mine
        assert set(checkpoints.OffsetCheckpointFile(
            os.path.join(d, "log-start-offset-checkpoint")).read()) == mine
        assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    meta_a = checkpoints.MetaProperties.read(a)
    meta_b = checkpoints.MetaProperties.read(b)
    assert meta_a is not None and meta_b is not None
    assert (meta_a.cluster_id, meta_a.node_id) == (meta_b.cluster_id, meta_b.node_id)
    assert meta_a.directory_id != meta_b.directory_id


def test_restart_finds_each_partition_in_its_dir(backend, tmp_path):
    a, b = _dirs(tmp_path)
    with _open(backend, a, b) as store:
        store.create_topic("t", 3)
        for p in range(3):
            store.topic("t").log(p).append_batch([b"x", b"y"])
        before = _held(store)
    # An unclean stop of one dir (its marker gone) recovers it; the other is clean.
    os.remove(os.path.join(b, ".kafka_cleanshutdown"))
    with _open(backend, a, b) as store:
        assert _held(store) == before
        assert store.topic("t").end_offsets() == {0: 2, 1: 2, 2: 2}
        store.create_partitions("t", 4)
        assert store.log_dir_of(("t", 3)) == b  # b held one, a two
        assert [r.value for r in store.topic("t").log(1).records()] == [b"x", b"y"]


def test_a_failed_dir_at_start_takes_only_its_partitions_offline(backend, tmp_path):
    a, b = _dirs(tmp_path)
    with _open(backend, a, b) as store:
        store.create_topic("t", 2)
        store.topic("t").log(0).append(b"kept")
        store.topic("t").log(1).append(b"gone")
    # The disk of b fails: the path is now a file, not a directory (its data set aside).
    os.rename(b, b + ".saved")
    with open(b, "wb") as f:
        f.write(b"not a dir")
    with pytest.warns(RuntimeWarning, match="offline"):
        store = _open(backend, a, b)
    with store:
        states = {os.path.basename(d.path): d for d in store.log_dirs()}
        assert states["a"].failure is None and states["b"].failure is not None
        assert [r.value for r in store.topic("t").log(0).records()] == [b"kept"]
        with pytest.raises(PartitionOfflineError):
            store.topic("t").log(1)
        assert set(store.offline_partitions()) == {TopicPartition("t", 1)}
        # New partitions go to the dir that serves.
        store.create_topic("n", 2)
        assert store.log_dir_of(("n", 0)) == store.log_dir_of(("n", 1)) == a
    # The disk comes back with its data: everything serves again, the new topic too.
    os.remove(b)
    os.rename(b + ".saved", b)
    with _open(backend, a, b) as store:
        assert store.offline_partitions() == {}
        assert [r.value for r in store.topic("t").log(1).records()] == [b"gone"]
        assert store.topic("n").partitions == 2
        assert _held(store)["a"] == ["n-0", "n-1", "t-0"]


def test_every_dir_failed_is_an_error(backend, tmp_path):
    a, b = _dirs(tmp_path)
    for d in (a, b):
        with open(d, "wb") as f:
            f.write(b"file")
    with pytest.raises(KafkaStorageError, match="every log dir failed"):
        _open(backend, a, b)


def test_a_dir_failed_at_runtime_goes_offline_with_its_partitions(backend, tmp_path):
    a, b = _dirs(tmp_path)
    with _open(backend, a, b) as store:
        store.create_topic("t", 2)
        dirs = {os.path.basename(d.path): d for d in store._logs.dirs}
        with pytest.warns(RuntimeWarning, match="offline"):
            gone = store._logs.fail_dir(dirs["b"], "an I/O error")
        assert gone == [TopicPartition("t", 1)]
        with pytest.raises(PartitionOfflineError):
            store.topic("t").log(1).append(b"x")
        store.topic("t").log(0).append(b"y")
        store.flush()  # nothing is written to the failed dir, the rest flushes
        assert [d.failure for d in store.log_dirs()] == [None, "an I/O error"]


def test_a_partition_moves_between_dirs_under_appends_and_loses_nothing(backend, tmp_path):
    import threading

    a, b = _dirs(tmp_path)
    with _open(backend, a, b, topic_config_defaults={"segment.bytes": 2000}) as store:
        store.create_topic("t", 1)
        assert store.log_dir_of(("t", 0)) == a
        acked: list[int] = []
        stop = threading.Event()

        def produce() -> None:
            for i in range(20_000):  # bounded; stops when the move is done
                if stop.is_set():
                    return
                try:
                    store.topic("t").log(0).append(f"{i}".encode())
                except Exception:  # noqa: BLE001 - the swap's moment: retried as clients do
                    continue
                acked.append(i)

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            while len(acked) < 300:
                writer.join(0.001)
            assert store.move_partition(("t", 0), b) is True
            count_at_swap = len(acked)
            while len(acked) < count_at_swap + 100 and writer.is_alive():
                writer.join(0.001)
        finally:
            stop.set()
            writer.join(30)
        assert store.log_dir_of(("t", 0)) == b
        assert not os.path.exists(os.path.join(a, "t-0"))
        assert store.moving_partitions() == {}
        values = [int(r.value) for r in store.topic("t").log(0).records()]
        assert values == acked  # every acknowledged append, in order, nothing else
        assert store.move_partition(("t", 0), b) is False  # already there
    with _open(backend, a, b) as store:
        assert store.log_dir_of(("t", 0)) == b
        assert [int(r.value) for r in store.topic("t").log(0).records()] == acked


def test_a_read_only_store_follows_a_writer_over_both_dirs(backend, tmp_path):
    a, b = _dirs(tmp_path)
    with _open(backend, a, b) as writer:
        writer.create_topic("t", 2)
        writer.topic("t").log(1).append(b"in b")
        writer.flush()
        with _open(backend, a, b, read_only=True) as reader:
            assert reader.log_dir_of(("t", 1)) == b
            assert [r.value for r in reader.topic("t").log(1).records()] == [b"in b"]
            writer.create_topic("u", 2)
            assert reader.refresh() is True
            assert {reader.log_dir_of(("u", p)) for p in range(2)} == {a, b}
