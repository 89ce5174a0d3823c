"""A Kafka log dir's KRaft metadata log (``__cluster_metadata-0``) is not a topic: Kafka's
``LogManager.loadLogs`` skips it, and so does :class:`seglog.Store`'s partition scan. The
directory is neither listed, opened, recovered nor recorded in the topics registry, and its
files stay as they are (here: bytes no log segment could hold, which a writer recovering
the directory as a partition would cut)."""

from __future__ import annotations

import json
import os

from seglog.store import CLUSTER_METADATA_TOPIC, TOPICS_FILE, Store


def _metadata_log(path) -> dict[str, bytes]:
    directory = os.path.join(path, f"{CLUSTER_METADATA_TOPIC}-0")
    return {name: open(os.path.join(directory, name), "rb").read()
            for name in sorted(os.listdir(directory))}


def _kafka_like_dir(tmp_path, backend) -> dict[str, bytes]:
    with Store(tmp_path, backend=backend) as store:
        store.create_topic("t")
        store.log(("t", 0)).append(b"v")
    directory = tmp_path / f"{CLUSTER_METADATA_TOPIC}-0"
    directory.mkdir()
    (directory / f"{0:020d}.log").write_bytes(b"\x00" * 12 + b"\xff" * 40)
    (directory / f"{0:020d}-{1:010d}.checkpoint").write_bytes(b"raft snapshot")
    (directory / "quorum-state").write_text('{"leaderId":1,"leaderEpoch":1}')
    # Kafka's Uuid.METADATA_TOPIC_ID
    (directory / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n")
    return _metadata_log(tmp_path)


def test_writer_store_skips_the_kraft_metadata_log(tmp_path, backend):
    before = _kafka_like_dir(tmp_path, backend)
    os.remove(tmp_path / ".kafka_cleanshutdown")  # recover every partition it opens
    with Store(tmp_path, backend=backend) as store:
        assert store.topics() == ["t"]
        assert [r.value for r in store.log(("t", 0)).records()] == [b"v"]
    assert _metadata_log(tmp_path) == before
    with open(tmp_path / TOPICS_FILE, encoding="utf-8") as f:
        assert CLUSTER_METADATA_TOPIC not in json.load(f)["topics"]
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        assert CLUSTER_METADATA_TOPIC not in (tmp_path / name).read_text()


def test_read_only_store_skips_the_kraft_metadata_log(tmp_path, backend):
    before = _kafka_like_dir(tmp_path, backend)
    with Store(tmp_path, backend=backend, read_only=True) as store:
        assert store.topics() == ["t"]
    assert _metadata_log(tmp_path) == before
