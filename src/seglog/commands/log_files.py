"""Reading a data directory's files for ``seglog dump`` and ``dump --verify``: which file is
which (by name, as Kafka's tool tells them), the whole batches of a ``.log``, the entries of
the index files. Only seglog's public parsers and :mod:`seglog.format` are used; nothing is
written."""

from __future__ import annotations

import os
import re
from typing import Any

from .. import filenames
from .. import format as fmt
from .._backend import default_backend
from ..errors import CorruptRecordError
from ..storage.txnindex import AbortedTxn

#: Offset checkpoints of a log dir's root (and of a standalone Log's partition dir).
OFFSET_CHECKPOINTS = (
    filenames.RECOVERY_POINT_CHECKPOINT,
    filenames.REPLICATION_OFFSET_CHECKPOINT,
    filenames.LOG_START_OFFSET_CHECKPOINT,
    filenames.CLEANER_OFFSET_CHECKPOINT,
)

_SEGMENT_NAME = re.compile(r"^(\d+)\.")
#: Suffixes of files a cleaner or a deletion left behind (not read by the tool).
STATE_SUFFIXES = (filenames.DELETED_SUFFIX, filenames.CLEANED_SUFFIX, filenames.SWAP_SUFFIX)


def file_kind(path: str) -> str | None:
    """What ``path`` holds, from its name: ``log``, ``index``, ``timeindex``, ``txnindex``,
    ``snapshot`` (by suffix, as Kafka's tool; a KRaft snapshot's ``.checkpoint`` is a
    ``log``), ``leader-epoch-checkpoint``,
    ``offset-checkpoint``, ``meta.properties``, ``partition.metadata``; None for another
    file (Kafka's "Ignoring unknown file")."""
    name = os.path.basename(path)
    if name == filenames.LEADER_EPOCH_CHECKPOINT:
        return "leader-epoch-checkpoint"
    if name in OFFSET_CHECKPOINTS:
        return "offset-checkpoint"
    if name in (filenames.META_PROPERTIES, filenames.PARTITION_METADATA):
        return name
    suffix = os.path.splitext(name)[1]
    # ".checkpoint": a KRaft snapshot (Kafka's tool reads it as a log)
    return {filenames.LOG_SUFFIX: "log", ".checkpoint": "log", filenames.INDEX_SUFFIX: "index",
            filenames.TIME_INDEX_SUFFIX: "timeindex", filenames.TXN_INDEX_SUFFIX: "txnindex",
            filenames.SNAPSHOT_SUFFIX: "snapshot"}.get(suffix)


def base_offset_of(path: str) -> int:
    """The base offset a segment file's name gives (Kafka's ``offsetFromFile``);
    ValueError for a name that does not start with digits."""
    found = _SEGMENT_NAME.match(os.path.basename(path))
    if found is None:
        raise ValueError(f"{path}: not a segment file name (NNNN...NNN.suffix)")
    return int(found.group(1))


def read_batches(data: bytes | memoryview) -> tuple[list[Any], int, CorruptRecordError | None]:
    """The whole batches at the start of ``data`` (Kafka's FileLogInputStream rules: a partial
    batch at the end stops the walk), the bytes they cover, and the error that stopped the
    walk early (a batch length below 14, a bad magic, ...), or None."""
    batches: list[Any] = []
    valid_bytes = 0
    try:
        for batch in default_backend().iter_batches(data):
            batches.append(batch)
            valid_bytes = batch.position + batch.size_bytes
    except CorruptRecordError as exc:
        if exc.position < 0:
            exc.position = valid_bytes
        return batches, valid_bytes, exc
    return batches, valid_bytes, None


def index_entries(data: bytes, entry: Any) -> list[tuple[int, int]]:
    """The whole entries of an index file's bytes (``entry`` a format struct), up to the
    first all-zero entry after the first (a preallocated, untrimmed tail: Kafka's tool stops
    at an entry naming the base offset again)."""
    out: list[tuple[int, int]] = []
    whole = len(data) - len(data) % entry.size
    for i, (a, b) in enumerate(entry.iter_unpack(data[:whole])):
        out.append((a, b))
        if i > 0 and a == 0 and b == 0:
            out.pop()
            break
    return out


def txn_index_entries(data: bytes) -> list[AbortedTxn]:
    """The entries of a ``.txnindex``'s bytes (a partial tail ignored, as Kafka);
    CorruptIndexError for a bad version."""
    whole = len(data) - len(data) % fmt.ABORTED_TXN_ENTRY_BYTES
    return [AbortedTxn.from_bytes(data, position)
            for position in range(0, whole, fmt.ABORTED_TXN_ENTRY_BYTES)]
