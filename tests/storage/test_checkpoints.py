"""Kafka's checkpoint, partition.metadata, meta.properties and clean-shutdown files."""

from __future__ import annotations

import os
import uuid

import pytest

from seglog import filenames
from seglog.storage.checkpoints import (
    CheckpointFile,
    EpochEntry,
    LeaderEpochCheckpointFile,
    MetaProperties,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    atomic_write_bytes,
    has_clean_shutdown_marker,
    new_kafka_uuid,
    parse_java_properties,
    read_clean_shutdown_broker_epoch,
    remove_clean_shutdown_marker,
    uuid_from_kafka_str,
    uuid_to_kafka_str,
    write_clean_shutdown_marker,
)
from seglog.errors import CorruptCheckpointError, InvalidTopicError


def _write(path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


# --- offset checkpoints -------------------------------------------------------------------------


def test_offset_checkpoint_bytes_are_kafkas(tmp_path):
    path = tmp_path / filenames.RECOVERY_POINT_CHECKPOINT
    OffsetCheckpointFile(path).write({("clicks", 0): 42, ("clicks", 1): 17})
    assert path.read_bytes() == b"0\n2\nclicks 0 42\nclicks 1 17\n"
    assert not os.path.exists(str(path) + ".tmp")


def test_offset_checkpoint_round_trip(tmp_path):
    cp = OffsetCheckpointFile(tmp_path / "cp")
    offsets = {("a", 0): 0, ("b.c_d-e", 7): 2**63 - 1, ("a", 2): 5}
    cp.write(offsets)
    assert cp.read() == offsets
    cp.write({})
    assert cp.read() == {}
    assert (tmp_path / "cp").read_bytes() == b"0\n0\n"


def test_missing_or_empty_checkpoint_reads_empty(tmp_path):
    assert OffsetCheckpointFile(tmp_path / "missing").read() == {}
    _write(tmp_path / "empty", "")
    assert OffsetCheckpointFile(tmp_path / "empty").read() == {}
    _write(tmp_path / "version-only", "0\n")
    assert OffsetCheckpointFile(tmp_path / "version-only").read() == {}


def test_reads_what_java_whitespace_and_line_ends_allow(tmp_path):
    _write(tmp_path / "cp", "0\r\n2\r\nt\t0  5\nu 1 6")  # \r\n, tabs, no final newline
    assert OffsetCheckpointFile(tmp_path / "cp").read() == {("t", 0): 5, ("u", 1): 6}


def test_version_mismatch(tmp_path):
    _write(tmp_path / "cp", "1\n0\n")
    with pytest.raises(CorruptCheckpointError, match="Unrecognised version:1, expected version: 0"):
        OffsetCheckpointFile(tmp_path / "cp").read()


def test_count_mismatch(tmp_path):
    _write(tmp_path / "cp", "0\n3\nt 0 5\n")
    with pytest.raises(CorruptCheckpointError, match="Expected 3 entries"):
        OffsetCheckpointFile(tmp_path / "cp").read()
    _write(tmp_path / "cp", "0\n0\nt 0 5\n")
    with pytest.raises(CorruptCheckpointError, match="Expected 0 entries"):
        OffsetCheckpointFile(tmp_path / "cp").read()


@pytest.mark.parametrize("text,bad_line", [
    ("x\n0\n", "x"),                       # version not a number
    ("0\nmany\n", "many"),                 # count not a number
    ("0\n1\nt 0\n", "t 0"),                # too few fields
    ("0\n1\nt 0 5 6\n", "t 0 5 6"),        # too many
    ("0\n1\n t 0 5\n", " t 0 5"),          # leading blank: Java's split gives 4 parts
    ("0\n1\nt x 5\n", "t x 5"),            # partition not an int
    ("0\n1\nt 0 5.0\n", "t 0 5.0"),        # offset not a long
    ("0\n1\nt 2147483648 5\n", "t 2147483648 5"),  # partition above Integer.MAX_VALUE
    ("0\n2\nt 0 5\n\n", ""),               # a blank line is malformed
])
def test_malformed_lines(tmp_path, text, bad_line):
    _write(tmp_path / "cp", text)
    with pytest.raises(CorruptCheckpointError, match="Malformed line") as info:
        OffsetCheckpointFile(tmp_path / "cp").read()
    assert info.value.line == bad_line
    assert info.value.path == str(tmp_path / "cp")


def test_not_utf8(tmp_path):
    (tmp_path / "cp").write_bytes(b"0\n1\n\xff 0 5\n")
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(tmp_path / "cp").read()


def test_topic_with_whitespace_cannot_be_written(tmp_path):
    with pytest.raises(InvalidTopicError):
        OffsetCheckpointFile(tmp_path / "cp").write({("a b", 0): 1})
    assert not (tmp_path / "cp").exists()


def test_write_replaces_atomically_over_a_stale_tmp(tmp_path):
    path = tmp_path / "cp"
    _write(str(path) + ".tmp", "garbage from a crash")
    OffsetCheckpointFile(path).write({("t", 0): 1})
    assert OffsetCheckpointFile(path).read() == {("t", 0): 1}
    assert not os.path.exists(str(path) + ".tmp")


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "cp"
    cp = OffsetCheckpointFile(path)
    cp.write({("t", 0): 1})

    def boom(fd):
        raise OSError(5, "injected fsync failure")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="injected"):
        cp.write({("t", 0): 2})
    monkeypatch.undo()
    assert cp.read() == {("t", 0): 1}


def test_atomic_write_bytes(tmp_path):
    atomic_write_bytes(tmp_path / "f", b"one")
    atomic_write_bytes(tmp_path / "f", b"two")
    assert (tmp_path / "f").read_bytes() == b"two"


def test_generic_checkpoint_file(tmp_path):
    cp = CheckpointFile(tmp_path / "g", version=3, to_line=str, from_line=int)
    cp.write([1, 2, 3])
    assert (tmp_path / "g").read_text() == "3\n3\n1\n2\n3\n"
    assert cp.read() == [1, 2, 3]


# --- leader-epoch checkpoint --------------------------------------------------------------------


def test_leader_epoch_checkpoint(tmp_path):
    path = tmp_path / filenames.LEADER_EPOCH_CHECKPOINT
    cp = LeaderEpochCheckpointFile(path)
    entries = [EpochEntry(0, 0), EpochEntry(3, 120), EpochEntry(4, 2**40)]
    cp.write(entries)
    assert path.read_bytes() == b"0\n3\n0 0\n3 120\n4 1099511627776\n"
    assert cp.read() == entries
    _write(path, "0\n1\n0 0 0\n")
    with pytest.raises(CorruptCheckpointError, match="Malformed line"):
        cp.read()


# --- Kafka uuids and partition.metadata ---------------------------------------------------------


def test_kafka_uuid_text_form():
    # Uuid.toString is base64url of the 16 bytes (most significant long first), no padding.
    value = uuid.UUID(bytes=bytes(range(16)))
    assert uuid_to_kafka_str(value) == "AAECAwQFBgcICQoLDA0ODw"
    assert uuid_from_kafka_str("AAECAwQFBgcICQoLDA0ODw") == value
    assert uuid_to_kafka_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert uuid_to_kafka_str(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"  # METADATA_TOPIC_ID
    assert uuid_from_kafka_str("_____________________w") == uuid.UUID(int=2**128 - 1)
    for bad in ("short", "A" * 25, "AAECAwQFBgcICQoLDA0O+w", "AAECAwQFBgcICQoLDA0ODw8"):
        with pytest.raises(ValueError):
            uuid_from_kafka_str(bad)


def test_new_kafka_uuid_avoids_reserved_values():
    for _ in range(200):
        value = new_kafka_uuid()
        assert value.int > 1 and not uuid_to_kafka_str(value).startswith("-")
        assert len(uuid_to_kafka_str(value)) == 22


def test_partition_metadata_round_trip(tmp_path):
    path = tmp_path / filenames.PARTITION_METADATA
    pm = PartitionMetadataFile(path)
    assert pm.read() is None and not pm.exists()
    topic_id = uuid.UUID(bytes=bytes(range(16)))
    pm.write(topic_id)
    assert path.read_bytes() == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw"
    assert pm.read() == topic_id


@pytest.mark.parametrize("text,match", [
    ("version: 1\ntopic_id: AAECAwQFBgcICQoLDA0ODw", "Unrecognized version"),
    ("version 0 x\ntopic_id: AAECAwQFBgcICQoLDA0ODw", "Malformed"),
    ("version: zero\ntopic_id: AAECAwQFBgcICQoLDA0ODw", "Malformed"),
    ("version: 0\n", "Malformed"),
    ("version: 0\ntopic_id: nope", "Malformed"),
    ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "Invalid topic ID"),
    ("", "Malformed"),
])
def test_partition_metadata_errors(tmp_path, text, match):
    _write(tmp_path / "pm", text)
    with pytest.raises(CorruptCheckpointError, match=match):
        PartitionMetadataFile(tmp_path / "pm").read()


# --- meta.properties ----------------------------------------------------------------------------


def test_meta_properties_kraft_round_trip(tmp_path):
    directory_id = uuid.UUID(bytes=bytes(range(16, 32)))
    meta = MetaProperties(version=1, cluster_id="MkU3OEVBNTcwNTJENDM2Qk", node_id=3,
                          directory_id=directory_id)
    path = meta.write(tmp_path, now_s=0)
    text = open(path, encoding="utf-8").read()
    assert text == ("#\n#Thu Jan 01 00:00:00 UTC 1970\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
                    "directory.id=EBESExQVFhcYGRobHB0eHw\nnode.id=3\nversion=1\n")
    assert MetaProperties.read(tmp_path) == meta


def test_meta_properties_zookeeper_era(tmp_path):
    _write(tmp_path / filenames.META_PROPERTIES, "#\n#Mon Jan 01 00:00:00 UTC 2024\n"
           "version=0\nbroker.id=7\ncluster.id=abc\n")
    assert MetaProperties.read(tmp_path) == MetaProperties(version=0, cluster_id="abc", node_id=7)
    meta = MetaProperties(version=0, node_id=2)
    meta.write(tmp_path)
    assert "broker.id=2" in (tmp_path / filenames.META_PROPERTIES).read_text()
    assert MetaProperties.read(tmp_path) == meta


@pytest.mark.parametrize("text,match", [
    ("version=2\nnode.id=1\ncluster.id=a\n", "Unknown meta.properties version"),
    ("version=1\ncluster.id=a\n", "node.id"),
    ("version=1\nnode.id=1\n", "cluster.id"),
    ("version=1\nnode.id=one\ncluster.id=a\n", "node.id"),
    ("version=1\nnode.id=1\ncluster.id=a\ndirectory.id=xyz\n", "directory.id"),
])
def test_meta_properties_errors(tmp_path, text, match):
    _write(tmp_path / filenames.META_PROPERTIES, text)
    with pytest.raises(CorruptCheckpointError, match=match):
        MetaProperties.read(tmp_path)


def test_meta_properties_missing(tmp_path):
    assert MetaProperties.read(tmp_path) is None


def test_java_properties_syntax():
    text = "# c\n! c\n  a=1\nb : 2\nc 3\nd\\\n   x\ne=\\u0041\\=\nf\\ g=h\n\n"
    assert parse_java_properties(text) == {"a": "1", "b": "2", "c": "3", "dx": "", "e": "A=",
                                           "f g": "h"}


# --- clean-shutdown marker ----------------------------------------------------------------------


def test_clean_shutdown_marker(tmp_path):
    assert not has_clean_shutdown_marker(tmp_path)
    assert read_clean_shutdown_broker_epoch(tmp_path) == -1
    path = write_clean_shutdown_marker(tmp_path, broker_epoch=12)
    assert os.path.basename(path) == ".kafka_cleanshutdown"
    assert open(path, "rb").read() == b'{"version":0,"brokerEpoch":12}'
    assert has_clean_shutdown_marker(tmp_path)
    assert read_clean_shutdown_broker_epoch(tmp_path) == 12
    assert remove_clean_shutdown_marker(tmp_path) is True
    assert not has_clean_shutdown_marker(tmp_path)
    assert remove_clean_shutdown_marker(tmp_path) is False


def test_unreadable_marker_still_counts_as_present(tmp_path):
    _write(tmp_path / ".kafka_cleanshutdown", "not json")
    assert has_clean_shutdown_marker(tmp_path)
    assert read_clean_shutdown_broker_epoch(tmp_path) == -1


@pytest.mark.parametrize("text", ['[]', 'null', '1', '{"version":0,"brokerEpoch":"7"}',
                                  '{"version":0,"brokerEpoch":1.5}',
                                  '{"version":0,"brokerEpoch":true}',
                                  '{"version":0,"brokerEpoch":99999999999999999999999}'])
def test_marker_with_wrong_json_types_reads_as_unknown_epoch(tmp_path, text):
    """Kafka's CleanShutdownFileHandler logs and returns -1 for anything it cannot read as a
    long: so do we (issue 8), never a TypeError and never an epoch past int64."""
    _write(tmp_path / ".kafka_cleanshutdown", text)
    assert has_clean_shutdown_marker(tmp_path)
    assert read_clean_shutdown_broker_epoch(tmp_path) == -1
