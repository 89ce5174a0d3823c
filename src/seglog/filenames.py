"""Every file and directory name seglog reads or writes, in one place (Kafka's LogFileUtils).

A segment's files are named after its base offset, zero-padded to 20 digits so that ``ls``
sorts them numerically; state suffixes (``.deleted``, ``.cleaned``, ``.swap``) are appended
to the whole name.
"""

from __future__ import annotations

import os
import re

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
#: seglog's own registry of topics and producer-id blocks in a data dir (see seglog.store).
TOPICS_FILE = "seglog-topics.json"

_PREFIX_DIGITS = 20
_SEGMENT_FILE = re.compile(r"^(\d{20})(\.[a-z]+)((?:\.[a-z]+)?)$")


def offset_prefix(offset: int) -> str:
    """The 20-digit, zero-padded decimal name prefix of ``offset`` (``00000000000000000042``)."""
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    return f"{offset:0{_PREFIX_DIGITS}d}"


def log_file(dir_path: str | os.PathLike, base_offset: int) -> str:
    """Path of the ``.log`` file of the segment at ``base_offset``."""
    return os.path.join(dir_path, offset_prefix(base_offset) + LOG_SUFFIX)


def index_file(dir_path: str | os.PathLike, base_offset: int) -> str:
    """Path of the ``.index`` (offset index) file of the segment at ``base_offset``."""
    return os.path.join(dir_path, offset_prefix(base_offset) + INDEX_SUFFIX)


def time_index_file(dir_path: str | os.PathLike, base_offset: int) -> str:
    """Path of the ``.timeindex`` file of the segment at ``base_offset``."""
    return os.path.join(dir_path, offset_prefix(base_offset) + TIME_INDEX_SUFFIX)


def txn_index_file(dir_path: str | os.PathLike, base_offset: int) -> str:
    """Path of the ``.txnindex`` (aborted transactions) file of the segment at ``base_offset``."""
    return os.path.join(dir_path, offset_prefix(base_offset) + TXN_INDEX_SUFFIX)


def snapshot_file(dir_path: str | os.PathLike, offset: int) -> str:
    """Path of the producer-state snapshot taken at ``offset``."""
    return os.path.join(dir_path, offset_prefix(offset) + SNAPSHOT_SUFFIX)


def segment_files(dir_path: str | os.PathLike, base_offset: int) -> tuple[str, ...]:
    """All per-segment files of the segment at ``base_offset`` (some may not exist)."""
    return (
        log_file(dir_path, base_offset),
        index_file(dir_path, base_offset),
        time_index_file(dir_path, base_offset),
        txn_index_file(dir_path, base_offset),
    )


def parse_segment_file(name: str) -> tuple[int, str, str] | None:
    """Split a file name into ``(offset, suffix, state_suffix)``, or None if it is not one of ours.

    ``"00000000000000000042.log.swap"`` -> ``(42, ".log", ".swap")``.
    """
    match = _SEGMENT_FILE.match(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2), match.group(3)


def partition_dir_name(topic: str, partition: int) -> str:
    """Kafka's partition directory name, ``<topic>-<partition>``."""
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """Split ``<topic>-<partition>`` into its parts, or None if ``name`` is not one."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)
