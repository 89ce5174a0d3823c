"""seglog operations the parts time, written against the backend interface
(``seglog._contract``).

Every function takes a backend view (:class:`~seglog.bench.data.BackendView`) and uses only
names from :mod:`seglog._contract`: ``encode_batch``, ``iter_batches``, ``decode_columns``,
``Segment`` (incl. ``read_record``) and ``OffsetIndex``. A missing name raises
:class:`~seglog.bench.data.Unavailable` with the reason, which the part reports as
"not available". Records go in batches of :data:`~seglog.bench.runner.BATCH_RECORDS`, the
unit of I/O (docs/design.md, section 1: "batches all the way down").
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
from typing import Any

from .data import BackendView

#: Segment size limit used by the bench (positions are int32).
SEGMENT_BYTES_MAX = (1 << 31) - 1


def encode_batches(be: BackendView, values: Any, batch_records: int) -> list[bytes]:
    """Encode ``values`` (a list of bytes or a 2-D uint8 array) into batches of
    ``batch_records`` records, uncompressed, base offsets 0, 1000, ..."""
    encode = be.need("encode_batch")
    return [encode(values[i:i + batch_records], base_offset=i)
            for i in range(0, len(values), batch_records)]


def open_segment(be: BackendView, dir_path: str, *, create: bool) -> Any:
    """``Segment.open(dir_path, 0, ...)`` with Kafka's default index interval (4096 B)."""
    segment_class = be.need("Segment")
    return segment_class.open(str(dir_path), 0, create=create)


#: Encoded batches are handed to ``Segment.append`` in lists of about this many bytes: one
#: pwritev per list (no join copy) instead of one per batch. Larger writes cost the kernel less
#: per byte (one inode update per call, larger page-cache folios): measured on ext4, 1,000-record
#: batches of 110 KB appended one by one took 1.6x the write time of the same bytes in 1.1 MB
#: pwritev calls (bench/results-issue27-append95.md).
APPEND_GROUP_BYTES = 1 << 20


def append_values(be: BackendView, segment: Any, values: Any, batch_records: int,
                  sync_every_records: int | None, *, sync_every_bytes: int | None = None,
                  group_bytes: int = APPEND_GROUP_BYTES) -> None:
    """Encode ``values`` in batches of ``batch_records`` and append them, about ``group_bytes``
    at a time (one ``Segment.append`` of a list of batches); fsync every
    ``sync_every_records`` records or ``sync_every_bytes`` bytes (rounded up to whole
    batches; a sync point also ends a group, so no sync is skipped) and once at the end."""
    encode = be.need("encode_batch")
    append, flush = segment.append, segment.flush
    group: list[bytes] = []
    group_size = 0
    records_since_sync = bytes_since_sync = 0
    for i in range(0, len(values), batch_records):
        chunk = values[i:i + batch_records]
        batch = encode(chunk, base_offset=i)
        group.append(batch)
        group_size += len(batch)
        records_since_sync += len(chunk)
        bytes_since_sync += len(batch)
        sync = ((sync_every_records is not None and records_since_sync >= sync_every_records)
                or (sync_every_bytes is not None and bytes_since_sync >= sync_every_bytes))
        if sync or group_size >= group_bytes:
            append(group)
            group, group_size = [], 0
        if sync:
            flush()
            records_since_sync = bytes_since_sync = 0
    if group:
        append(group)
    flush()


def append_values_threaded(be: BackendView, segment: Any, values: Any, batch_records: int,
                           *, sync_every_bytes: int | None = None,
                           group_bytes: int = APPEND_GROUP_BYTES) -> None:
    """:func:`append_values` on two threads: this one encodes the next group of batches while
    a writer thread appends the previous group (one ``Segment.append`` of the list) and
    fdatasyncs once ``sync_every_bytes`` or more were appended since its last sync, and once
    at the end. ``Segment.append`` and ``flush`` release the GIL around pwritev and
    fdatasync, so the disk work of one group overlaps the encode of the next on another
    core. The same bytes and no fewer syncs than :func:`append_values`; an error in the writer
    is raised here and nothing is appended after it."""
    encode = be.need("encode_batch")
    append, flush = segment.append, segment.flush
    handoff: queue.Queue = queue.Queue(maxsize=2)
    failure: list[BaseException] = []

    def write() -> None:
        since_sync = 0
        while True:
            group = handoff.get()
            if group is None:
                return
            if failure:
                continue  # drain: the encoder stops at its next check
            try:
                append(group)
                since_sync += sum(len(batch) for batch in group)
                if sync_every_bytes is not None and since_sync >= sync_every_bytes:
                    flush()
                    since_sync = 0
            except BaseException as exc:  # handed to the caller's thread
                failure.append(exc)

    writer = threading.Thread(target=write, name="seglog-bench-appender", daemon=True)
    writer.start()
    try:
        group: list[bytes] = []
        group_size = 0
        for i in range(0, len(values), batch_records):
            if failure:
                break
            batch = encode(values[i:i + batch_records], base_offset=i)
            group.append(batch)
            group_size += len(batch)
            if group_size >= group_bytes:
                handoff.put(group)
                group, group_size = [], 0
        if group and not failure:
            handoff.put(group)
    finally:
        handoff.put(None)
        writer.join()
    if failure:
        raise failure[0]
    flush()


def append_encoded(segment: Any, batches: list[bytes]) -> None:
    """Append already-encoded batches (offsets assigned by the segment), then fsync."""
    append = segment.append
    for batch in batches:
        append(batch)
    segment.flush()


def whole_view(segment: Any) -> memoryview:
    """Every batch of ``segment`` as one zero-copy view (``read(0, size_bytes)``)."""
    return segment.read(0, max(1, segment.size_bytes))


def scan_records(be: BackendView, segment: Any) -> int:
    """Iterate every record object of every batch, touching ``value``; returns the count."""
    iter_batches = be.need("iter_batches")
    count = 0
    for batch in iter_batches(whole_view(segment)):
        for record in batch.records():
            record.value
            count += 1
    return count


def scan_columns(be: BackendView, segment: Any) -> int:
    """Decode every batch into numpy columns (no per-record objects); returns the count."""
    decode_columns = be.need("decode_columns")
    return len(decode_columns(whole_view(segment)))


def read_record_columns(be: BackendView, segment: Any, offset: int) -> Any:
    """Value of the record at ``offset``: sparse index lookup + header scan (``read``), then
    the batch decoded to columns and indexed (no per-record objects)."""
    view = segment.read(offset, 1)
    columns = be.namespace.decode_columns(view)
    return columns.value(offset - int(columns.offsets[0]))


def read_record_objects(be: BackendView, segment: Any, offset: int) -> Any:
    """Value of the record at ``offset`` the Kafka-client way: read the batch, decode its
    records into objects, scan to the offset."""
    view = segment.read(offset, 1)
    for batch in be.namespace.iter_batches(view):
        for record in batch.records():
            if record.offset == offset:
                return record.value
    return None


def read_record(segment: Any, offset: int) -> Any:
    """Value of the record at ``offset`` through ``Segment.read_record``: index lookup and
    header scan to the batch, then the records before it skipped by their length prefixes
    (no per-record objects) and one Record built."""
    if not hasattr(segment, "read_record"):
        from .data import Unavailable

        raise Unavailable("Segment.read_record is not implemented by this backend")
    record = segment.read_record(offset)
    return None if record is None else record.value


def random_reads_record(segment: Any, offsets: list[int]) -> None:
    """``Segment.read_record`` for every offset (the point read), touching each value."""
    if not hasattr(segment, "read_record"):
        from .data import Unavailable

        raise Unavailable("Segment.read_record is not implemented by this backend")
    read = segment.read_record
    for offset in offsets:
        read(offset).value


def random_reads_value(segment: Any, offsets: list[int]) -> None:
    """``Segment.read_value`` for every offset: the point read answering the value only (as
    LMDB's get does), same lookup, CRC check and record parse as ``read_record``."""
    if not hasattr(segment, "read_value"):
        from .data import Unavailable

        raise Unavailable("Segment.read_value is not implemented by this backend")
    read = segment.read_value
    for offset in offsets:
        read(offset)


def random_reads_columns(be: BackendView, segment: Any, offsets: list[int]) -> None:
    """:func:`read_record_columns` for every offset."""
    be.need("decode_columns")
    for offset in offsets:
        read_record_columns(be, segment, offset)


def random_reads_objects(be: BackendView, segment: Any, offsets: list[int]) -> None:
    """:func:`read_record_objects` for every offset."""
    be.need("iter_batches")
    for offset in offsets:
        read_record_objects(be, segment, offset)


def random_batch_reads(segment: Any, offsets: list[int]) -> None:
    """Only find and map the batch holding each offset (index + header scan, zero-copy):
    what a Kafka fetch at a random offset costs before any decoding."""
    read = segment.read
    for offset in offsets:
        read(offset, 1)


def dir_size_bytes(path: str) -> int:
    """Bytes of every regular file under ``path`` (apparent sizes)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def remove_tree(path: str) -> None:
    """Remove a scratch directory and everything in it (errors ignored)."""
    shutil.rmtree(path, ignore_errors=True)
