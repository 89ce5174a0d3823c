"""Store(replicated=True): high watermarks restored from ``replication-offset-checkpoint``
(clamped to each partition's offsets, never the end offset), written back on flush and close,
and never exceeded by what readers see; ``create_topic(topic_id=...)`` (a cluster's ids).

Kafka tests these come from: ``HighwatermarkPersistenceTest``
(``testHighWatermarkPersistenceSinglePartition`` / ``MultiplePartitions``), ``LogRecoveryTest``
(the high watermark survives a restart), ``PartitionTest.testUseCheckpointToInitializeHighWatermark``.
Every test runs on both backends.
"""

from __future__ import annotations

import os
import uuid

import pytest

from seglog import Store, filenames
from seglog.storage.checkpoints import ZERO_UUID, OffsetCheckpointFile, PartitionMetadataFile

NOW_MS = 1_700_000_000_000
TOPIC_ID = uuid.UUID("6f1d3c2a-0b9e-4f5d-8a7b-1c2d3e4f5a6b")


def hw_file(path):
    return OffsetCheckpointFile(os.path.join(path, filenames.REPLICATION_OFFSET_CHECKPOINT))


def fill(log, count):
    for i in range(count):
        log.append(b"v%d" % i, now_ms=NOW_MS)


def test_high_watermark_survives_reopen_and_is_never_exceeded(tmp_path, backend):
    path = str(tmp_path / "d")
    with Store(path, backend=backend.name, replicated=True) as store:
        store.create_topic("t", 2, topic_id=TOPIC_ID)
        log0, log1 = store.log(("t", 0)), store.log(("t", 1))
        fill(log0, 10)
        fill(log1, 3)
        assert (log0.end_offset, log0.high_watermark) == (10, 0)  # appends do not commit
        assert list(log0.records()) == []
        log0.update_high_watermark(6)
        log1.update_high_watermark(3)
        store.flush()
        assert hw_file(path).read() == {("t", 0): 6, ("t", 1): 3}
        log0.update_high_watermark(7)
    assert hw_file(path).read()[("t", 0)] == 7  # close writes them too
    with Store(path, backend=backend.name, replicated=True) as store:
        log0 = store.log(("t", 0))
        assert (log0.end_offset, log0.high_watermark) == (10, 7)
        assert [r.offset for r in log0.records()] == list(range(7))
        assert log0.read(7).size_bytes == 0
        assert store.log(("t", 1)).high_watermark == 3
        consumer = store.consumer(None)
        consumer.assign([("t", 0)])
        consumer.seek(("t", 0), 0)
        seen = []
        for _ in range(20):  # bounded
            batch = consumer.poll(timeout_ms=0)
            if not batch:
                break
            seen += [r.offset for r in batch]
        assert seen == list(range(7))
        consumer.close()
    with Store(path, backend=backend.name) as store:  # standalone: follows the end
        assert store.log(("t", 0)).high_watermark == 10


def test_checkpoint_values_are_clamped_to_the_log(tmp_path, backend):
    path = str(tmp_path / "d")
    with Store(path, backend=backend.name, replicated=True) as store:
        store.create_topic("t", 3)
        for p in range(3):
            fill(store.log(("t", p)), 5)
        log2 = store.log(("t", 2))
        log2.update_high_watermark(5)
        log2.delete_records_before(4)
    # A checkpoint from before a truncation (above the end), one below the start, none for
    # partition 1 (a crash before the first checkpoint): [start, end] bounds each.
    hw_file(path).write({("t", 0): 50, ("t", 2): 1})
    with Store(path, backend=backend.name, replicated=True) as store:
        assert store.log(("t", 0)).high_watermark == 5
        assert store.log(("t", 1)).high_watermark == 0
        assert store.log(("t", 2)).start_offset == 4
        assert store.log(("t", 2)).high_watermark == 4


CRASHING_REPLICA = """
import os, sys
from seglog.store import Store
store = Store(sys.argv[1], backend=sys.argv[2], replicated=True)
log = store.create_topic("t").log(0)
for i in range(8):
    log.append(b"v%d" % i)
log.update_high_watermark(4)
store.flush()
log.update_high_watermark(8)  # not checkpointed: lost with the process
os._exit(0)  # a crash: no close, no checkpoints, no clean-shutdown marker
"""


def test_high_watermark_after_a_crash_is_the_last_flushed(tmp_path, backend):
    # HighwatermarkPersistenceTest: the checkpoint, not the log end, after an unclean stop.
    import subprocess
    import sys
    path = str(tmp_path / "d")
    src = os.path.join(os.path.dirname(__file__), os.pardir, "src")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(src))
    subprocess.run([sys.executable, "-c", CRASHING_REPLICA, path, backend.name], check=True,
                   env=env, timeout=60)
    assert not os.path.exists(os.path.join(path, filenames.CLEAN_SHUTDOWN_MARKER))
    with Store(path, backend=backend.name, replicated=True) as store:
        log = store.log(("t", 0))
        assert not log.recovery_report.clean_shutdown
        assert (log.end_offset, log.high_watermark) == (8, 4)


def test_create_topic_with_a_cluster_topic_id(tmp_path, backend):
    path = str(tmp_path / "d")
    with Store(path, backend=backend.name) as store:
        topic = store.create_topic("t", 2, topic_id=TOPIC_ID)
        assert topic.topic_id == "bx08KgueT12KexwtPk9aaw"
        for p in range(2):
            topic.log(p).append(b"v")  # the close's flush writes partition.metadata
        for bad, error in (("x", TypeError), (str(TOPIC_ID), TypeError),
                           (ZERO_UUID, ValueError), (uuid.UUID(int=1), ValueError)):
            with pytest.raises(error):
                store.create_topic("u", 1, topic_id=bad)
        assert "u" not in store.topics()
    for p in range(2):
        metadata = PartitionMetadataFile(os.path.join(path, f"t-{p}", filenames.PARTITION_METADATA))
        assert metadata.read() == TOPIC_ID
    with Store(path, backend=backend.name) as store:
        assert store.topic("t").topic_id == topic.topic_id
