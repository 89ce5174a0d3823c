"""The backend interface: what ``seglog.pure`` and ``seglog._native`` both provide.

The Python layer (Log, Store, ...) only ever calls these names on the backend object it was
given; it never branches on which backend that is. Both backends pass the same tests and write
byte-identical files. This module is the contract in code (``typing.Protocol``); the
docstrings are the contract in words and are binding for both implementations.

Every name here exists on both backends, and neither backend has a public name (module level or
on a contract class) that is not here: ``tests/twins/test_contract.py`` checks both directions,
and that the signatures match. The Cython modules' stubs (``seglog/_native/*.pyi``) are checked
against the compiled modules by the same test and with this module by ``mypy --strict``
(``tests/twins/test_typing.py``). Nothing imports this module at run time; use it for
annotations (``if TYPE_CHECKING: from seglog import _contract``).

Vocabulary: *offset* is a record number; *position* a byte index in a file or buffer;
*base_offset* a batch's or segment's first offset; *relative offset* ``offset - base_offset``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .compression import DECOMPRESSED_BYTES_MAX_DEFAULT

__all__ = ["AccumulatorModule", "Backend", "Batch", "BatchResult", "Columns", "ConsumerRecord",
           "KeyMap",
           "KeyMapModule", "OffsetIndex", "Record", "RecordBuffer", "ReentrantLock", "Segment",
           "SendFuture", "Sender", "TimeIndex", "TopicSlots", "WireModule"]

if TYPE_CHECKING:
    import os
    import threading

    import numpy as np
    from numpy.typing import NDArray
    from typing_extensions import Buffer, Self, TypeAlias

    from .results import AppendResult, RecoveryResult

    #: Any object with the buffer protocol: bytes, bytearray, memoryview, mmap, numpy array.
    BytesLike: TypeAlias = Buffer
    #: A path as ``os.fspath`` takes it.
    PathLike: TypeAlias = "str | os.PathLike[str]"
    #: One record's headers as a Record holds them.
    Headers: TypeAlias = tuple[tuple[str, "bytes | None"], ...]
    #: Keys or values for ``encode_batch``: a sequence of bytes-like or None, a 2-D
    #: C-contiguous uint8 array (one row per record), or ``(data, lengths)`` (lengths -1 for
    #: null, summing to the used bytes of data).
    RecordColumn: TypeAlias = (
        "Sequence[BytesLike | None] | NDArray[np.uint8]"
        " | tuple[BytesLike, NDArray[np.integer[Any]]]"
    )
    #: Timestamps for ``encode_batch``: None (wall clock), one int, or one per record.
    Timestamps: TypeAlias = "int | Sequence[int] | NDArray[np.int64] | None"
    #: Headers for ``encode_batch``: None, or per record None or ``(str, bytes | None)`` pairs.
    HeaderColumn: TypeAlias = "Sequence[Sequence[tuple[str, BytesLike | None]] | None] | None"
    #: ``offset - base_offset`` per record for ``encode_batch`` (the cleaner's re-encode).
    OffsetDeltas: TypeAlias = "Sequence[int] | NDArray[np.integer[Any]] | None"


class Record(Protocol):
    """One record. ``key`` and ``value`` are ``bytes`` or None; ``headers`` a tuple of
    ``(str, bytes | None)`` pairs (``()`` when there are none). Equality compares the five
    fields; ``tuple(record)`` gives ``(offset, timestamp_ms, key, value, headers)``."""

    def __init__(self, offset: int, timestamp_ms: int, key: bytes | None, value: bytes | None,
                 headers: Headers = ()) -> None:
        """A record as the decoders build it (the fields are stored as given)."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Headers: ...

    def __iter__(self) -> Iterator[Any]:
        """``offset, timestamp_ms, key, value, headers`` in that order."""

    def __eq__(self, other: object) -> bool:
        """Equal to another Record with the same five fields."""

    def __hash__(self) -> int:
        """Hash of the five fields."""


class ConsumerRecord(Protocol):
    """One record as a consumer sees it (``seglog.types.ConsumerRecord`` is the default
    backend's class): ``topic``, ``partition``, ``offset``, ``timestamp_ms``, ``key``,
    ``value``, ``headers``, read-only. Tuple-like, not a tuple subclass: ``tuple(record)``,
    unpacking, ``record[i]`` and ``len`` give the seven fields in that order; ``_fields``,
    ``_asdict``, ``_replace`` and ``_make`` as a NamedTuple's; equal to, hashed and ordered as
    the tuple of its fields (so the twins' records equal each other and that tuple)."""

    def __init__(self, topic: str, partition: int, offset: int, timestamp_ms: int,
                 key: bytes | None, value: bytes | None, headers: Headers) -> None:
        """A record of these fields (the ints must fit: int32 partition, int64 others)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Headers: ...

    def __len__(self) -> int:
        """7."""

    def __iter__(self) -> Iterator[Any]:
        """The seven fields in order."""

    def __getitem__(self, index: Any) -> Any:
        """``tuple(record)[index]``."""

    def __eq__(self, other: object) -> bool:
        """Equal to a tuple or ConsumerRecord of the same seven fields."""

    def __hash__(self) -> int:
        """Hash of the tuple of the seven fields."""

    def __repr__(self) -> str:
        """``ConsumerRecord(topic=..., ...)``, as the NamedTuple's."""

    def __reduce__(self) -> Any:
        """Pickled as its class and fields."""


class Columns(Protocol):
    """Records of one or more batches as numpy columns, with no per-record Python objects.

    ``offsets`` and ``timestamps_ms`` are int64 arrays. ``key_positions``/``value_positions``
    (int64) and ``key_lengths``/``value_lengths`` (int32, -1 for null) locate each key and value
    in ``data``, a read-only bytes-like object: the input buffer itself for uncompressed batches,
    or a buffer of decompressed record areas. ``len(columns)`` is the record count.
    ``columns.key(i)``/``columns.value(i)`` return ``bytes`` or None for one record.
    """

    offsets: NDArray[np.int64]
    timestamps_ms: NDArray[np.int64]
    key_positions: NDArray[np.int64]
    key_lengths: NDArray[np.int32]
    value_positions: NDArray[np.int64]
    value_lengths: NDArray[np.int32]
    data: BytesLike

    def __init__(self, *, offsets: NDArray[np.int64], timestamps_ms: NDArray[np.int64],
                 key_positions: NDArray[np.int64], key_lengths: NDArray[np.int32],
                 value_positions: NDArray[np.int64], value_lengths: NDArray[np.int32],
                 data: BytesLike) -> None:
        """Columns over arrays already built (the decoders' result type)."""

    def __len__(self) -> int:
        """The record count."""

    def key(self, index: int) -> bytes | None:
        """Record ``index``'s key (IndexError out of range; negative counts from the end)."""

    def value(self, index: int) -> bytes | None:
        """Record ``index``'s value (as ``key``)."""


class Batch(Protocol):
    """One RecordBatch v2 header, decoded, over a buffer that holds the whole batch.

    Attributes are Kafka's header fields in snake case plus derived ones: ``base_offset``,
    ``batch_length``, ``partition_leader_epoch``, ``magic``, ``crc``, ``attributes``,
    ``last_offset_delta``, ``base_timestamp_ms``, ``max_timestamp_ms``, ``producer_id``,
    ``producer_epoch``, ``base_sequence``, ``record_count``; derived: ``last_offset``,
    ``next_offset`` (last_offset + 1), ``size_bytes`` (12 + batch_length), ``position``
    (where the batch starts in the iterated buffer), ``compression`` (name), ``compression_id``,
    ``timestamp_type`` (0 CreateTime, 1 LogAppendTime), ``is_transactional``, ``is_control``,
    ``has_delete_horizon``, ``delete_horizon_ms`` (or -1), ``last_sequence`` (Kafka's wrapping
    rule; -1 when base_sequence is -1).
    """

    def __init__(self, buffer: BytesLike, position: int = 0) -> None:
        """The batch header at ``position`` of ``buffer`` (which must hold the whole batch);
        CorruptRecordError as ``iter_batches`` for a header it would refuse."""

    @property
    def position(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def batch_length(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def magic(self) -> int: ...
    @property
    def crc(self) -> int: ...
    @property
    def attributes(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def base_timestamp_ms(self) -> int: ...
    @property
    def max_timestamp_ms(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def record_count(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def compression_id(self) -> int: ...
    @property
    def compression(self) -> str: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def has_delete_horizon(self) -> bool: ...
    @property
    def delete_horizon_ms(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...

    def is_valid(self) -> bool:
        """True if the stored CRC32C equals the CRC of bytes 21..end."""

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError(reason=REASON_CRC_MISMATCH) unless ``is_valid()``."""

    def records(self, *, check_crcs: bool = True,
                max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT) -> Sequence[Record]:
        """Decode every record (decompressing if needed) into Record objects. For
        LogAppendTime batches every record's timestamp is ``max_timestamp_ms``. The CRC32C is
        checked first (once per Batch object) unless ``check_crcs`` is false: a mismatch is
        CorruptRecordError(REASON_CRC_MISMATCH). Decompression stops past
        ``max_decompressed_bytes`` (REASON_DECOMPRESSED_TOO_LARGE). Raises
        InvalidRecordError / CorruptRecordError on malformed records (Kafka's checks)."""

    def consumer_records(self, record_type: type[Any], topic: str, partition: int,
                         min_offset: int = 0, *, check_crcs: bool = True,
                         max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT
                         ) -> list[Any]:
        """``record_type(topic, partition, offset, timestamp_ms, key, value, headers)`` for
        each record at or after ``min_offset`` (a record type with 7 ``_fields``: either
        twin's ConsumerRecord; TypeError otherwise), decoded straight from the batch (the
        backend's own ConsumerRecord without calling it); every record is checked as by
        ``records`` (same arguments, same errors)."""

    def record_at(self, offset: int, *, check_crcs: bool = True,
                  max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT) -> Record | None:
        """The record with ``offset``, or None when no record has it (outside
        ``[base_offset, last_offset]``, a gap left by compaction, record_count 0). Records
        before it are skipped by their framing only (length, attributes, timestamp and offset
        deltas read and checked; keys, values and headers not); the record itself gets every
        check of ``records()``. Compressed batches are decompressed; a control batch's record
        is returned. Raises as ``records()`` for malformed framing up to that record."""

    def columns(self, *, check_crcs: bool = True,
                max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT) -> Columns:
        """This batch's records as numpy columns (checks as ``records()``)."""

    def record_summary(self, *, check_crcs: bool = True,
                       max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT
                       ) -> tuple[int, bool, int, int, int]:
        """``(record_count, offsets_in_order, min_timestamp_ms, max_timestamp_ms,
        first_keyless)`` of this batch's records, without numpy (the produce validation's
        one pass; checks as ``records()``): records parsed, whether their offsets are
        ``base_offset + 0..n-1``, the timestamp range (-1, -1 without records), the index of
        the first null key (-1 for none)."""

    def control_type(self, *, check_crcs: bool = True) -> int:
        """For a control batch, the type in its record key (0 ABORT, 1 COMMIT, ...)."""


class _Index(Protocol):
    """What OffsetIndex and TimeIndex share (see OffsetIndex for the rules)."""

    path: str

    def __init__(self, path: PathLike, base_offset: int, *, max_index_bytes: int = 10485760,
                 writable: bool = True, preallocate: bool = True) -> None:
        """Open or create the index file (see the class docstring)."""

    @property
    def base_offset(self) -> int: ...
    @property
    def writable(self) -> bool: ...
    @property
    def entries(self) -> int: ...
    @property
    def max_index_bytes(self) -> int: ...
    @property
    def max_entries(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def reserved_bytes(self) -> int:
        """Bytes at the start of the file whose disk blocks are reserved (``posix_fallocate``
        since the file was last mapped); the whole mapped length where fallocate is not
        supported. Both twins reserve in the same steps: one page first, then as far ahead as
        the entries reach (at most 1 MiB), never past the file's length."""

    def reserve(self, count: int) -> None:
        """Reserve the disk blocks of the next ``count`` entries before anything is written
        (the segment calls it before its ``.log`` write, so that an append on a full disk
        fails and writes nothing). ``append``/``maybe_append`` reserve their own slot too: no
        entry is ever stored into an unreserved page, where a full disk would be SIGBUS.
        KafkaStorageError (an OSError: ENOSPC, EDQUOT, EIO, ...) when the disk refuses;
        ValueError for a negative count. No page is touched."""

    def is_full(self) -> bool:
        """No room for another entry."""

    def reset(self) -> None:
        """Drop every entry: 0 entries, the file set to ``max_index_bytes`` again (sparse, all
        zeros)."""

    def trim(self) -> None:
        """Set the file length to ``entries`` times the entry size."""

    def resize(self, max_index_bytes: int) -> None:
        """Set the file length (rounded down to whole entries, never below the entries)."""

    def flush(self) -> None:
        """Write the map's dirty pages to the file (msync; no fsync: the indexes are derived data,
        rebuilt from the .log after an unclean shutdown)."""

    def reload(self) -> None:
        """Read-only: recount the entries after the writer appended."""

    def close(self) -> None:
        """msync (if writable) and unmap; no trim (the segment trims before closing); idempotent."""

    def entry(self, n: int) -> tuple[int, int]:
        """Entry ``n`` (0-based, IndexError outside ``[0, entries)``)."""

    def lookup(self, target: int) -> tuple[int, int]:
        """The entry at or below ``target`` (see the subclass)."""

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose offset >= ``offset``."""

    def __enter__(self) -> Self: ...
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None: ...


class OffsetIndex(_Index, Protocol):
    """Sparse offset index of one segment: ``<base>.index``, 8-byte big-endian entries
    ``(relative_offset int32, position int32)`` (Kafka's OffsetIndex/AbstractIndex, §2.2-2.5).

    ``OffsetIndex(path, base_offset, *, max_index_bytes=10485760, writable=True,
    preallocate=True)`` opens or creates the file. A writable index on an empty (or new) file is
    preallocated (file length set, zero-filled) to ``max_index_bytes`` rounded down to a
    multiple of 8 and mmapped; with ``preallocate=False`` it is mapped at its current length
    (an empty file stays empty and full until ``resize``). On open, the entry count is
    the number of entries before the first all-zero entry (an entry never has position 0, so
    zero entries can only be the unused, preallocated tail); this lets a read-only reader open
    the writer's untrimmed index. Attributes: ``path``, ``base_offset``, ``entries``,
    ``max_entries``, ``last_offset`` (absolute; base_offset when empty), ``size_bytes``
    (entries * 8). Methods:

    * ``append(offset, position)``: InvalidOffsetError unless ``entries == 0 or offset >
      last_offset`` and ``0 <= offset - base_offset <= INT32_MAX``; IndexFullError when full.
    * ``lookup(target_offset) -> (offset, position)``: entry with the greatest offset <=
      target, or ``(base_offset, 0)``; Kafka's warm-section binary search (last 8 KiB first).
    * ``entry(n) -> (offset, position)``; ``is_full()``; ``truncate_to(offset)`` (Kafka's
      rule: drop entries with offset >= ``offset``); ``reset()`` (0 entries);
      ``trim()`` (file length = entries * 8); ``resize(max_index_bytes)``;
      ``sanity_check(*, log_size_bytes=None)`` (CorruptIndexError unless relative offsets and
      positions strictly increase, positions are >= 0 and below ``log_size_bytes``);
      ``flush()`` (msync/fsync); ``close()``; ``reload()`` (read-only: recount entries after
      the writer appended). Entries are untrusted bytes: the Segment also checks that a
      looked-up position holds a batch header before it uses it.
    """

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; InvalidOffsetError / IndexFullError (class docstring)."""

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the greatest entry offset <= ``target_offset``, or
        ``(base_offset, 0)``."""

    def sanity_check(self, *, log_size_bytes: int | None = None) -> None:
        """CorruptIndexError unless relative offsets and positions strictly increase and
        positions are >= 0 and below ``log_size_bytes``."""


class TimeIndex(_Index, Protocol):
    """Sparse time index: ``<base>.timeindex``, 12-byte entries ``(timestamp int64,
    relative_offset int32)`` (Kafka's TimeIndex, §2.3). Same construction, counting, trim,
    resize, reset, flush, close and reload rules as OffsetIndex (zero entries end it: an entry
    ``(0, 0)`` is never written past the first slot... a first entry of timestamp 0 and relative
    offset 0 is not possible because the first batch never gets an entry).

    * ``maybe_append(timestamp_ms, offset, *, skip_full_check=False)``: writes only if
      ``timestamp_ms > last_entry timestamp`` (or the index is empty); IndexFullError when full
      unless skip_full_check; InvalidOffsetError if offset < last entry's offset.
    * ``lookup(timestamp_ms) -> (timestamp_ms, offset)``: greatest timestamp <= target, or
      ``(-1, base_offset)``. ``last_entry() -> (timestamp_ms, offset)`` or ``(-1, base_offset)``.
    * ``is_full()`` is ``entries >= max_entries - 1`` (last slot reserved for the roll entry).
    * ``truncate_to(offset)`` drops entries whose offset >= ``offset``.
    * ``sanity_check(*, next_offset=None)``: CorruptIndexError unless timestamps do not
      decrease and offsets do not decrease and stay below ``next_offset``.
    """

    def maybe_append(self, timestamp_ms: int, offset: int, *,
                     skip_full_check: bool = False) -> None:
        """Add ``(timestamp_ms, offset)`` if ``timestamp_ms`` is above the last entry's."""

    def lookup(self, timestamp_ms: int) -> tuple[int, int]:
        """``(timestamp_ms, offset)`` of the greatest entry timestamp <= ``timestamp_ms``, or
        ``(-1, base_offset)``."""

    def last_entry(self) -> tuple[int, int]:
        """``(timestamp_ms, offset)`` of the last entry, or ``(-1, base_offset)``."""

    def sanity_check(self, *, next_offset: int | None = None) -> None:
        """CorruptIndexError unless timestamps and offsets do not decrease and offsets stay
        below ``next_offset``."""


class Segment(Protocol):
    """One segment: ``<base>.log`` + ``.index`` + ``.timeindex`` in a partition directory
    (Kafka's LogSegment). Not thread-safe: the Log serialises calls.

    Construction: ``Segment.open(dir_path, base_offset, *, create=False, read_only=False,
    index_interval_bytes=4096, max_index_bytes=10485760, max_message_bytes=1048588,
    file_suffix="")``. ``file_suffix`` (e.g. ``".cleaned"``) is appended to every file name.
    Opening an existing segment checks its indexes (``sanity_check``; a writer empties a
    broken one and sets ``indexes_need_rebuild`` so the Log recovers the segment, a reader
    ignores it and scans) and finds ``next_offset`` by scanning batch headers forward from the
    last valid offset-index entry; its
    indexes open at their current (trimmed) length, never preallocated (a missing one is created
    empty): only the active segment's are appended to, and the Log ``resize_indexes()`` it
    (Kafka's LogLoader). ``create=True`` makes empty files (an existing .log is an error unless
    empty) with preallocated indexes.

    Attributes: ``dir_path``, ``base_offset``, ``next_offset`` (last offset + 1, or
    base_offset when empty), ``size_bytes``, ``max_timestamp_ms`` (-1 when none),
    ``offset_of_max_timestamp``, ``first_batch_timestamp_ms`` (max timestamp of the first batch,
    -1 when empty: Kafka's roll-by-time base), ``offset_index``, ``time_index`` (None for a
    ``read_only`` segment opened without that index file, which sets ``indexes_need_rebuild``;
    a writer always has both), ``log_path``, ``read_only``, ``closed``.

    * ``append(data, *, assign_offsets=True) -> AppendResult`` with fields
      ``first_offset, last_offset, max_timestamp_ms, offset_of_max_timestamp, position,
      size_bytes, batch_count``. ``data`` (bytes-like) holds one or more whole batches, or
      is a list or tuple of bytes-like parts, each holding whole batches, appended as if
      joined (positions in errors and results count the parts joined; no copy is made). Each
      batch is validated before writing (size >= 61 and matching its records area, magic 2,
      CRC32C, 0 <= last_offset_delta, batch size <= max_message_bytes else
      RecordTooLargeError). With assign_offsets the batches get consecutive offsets from
      ``next_offset`` by patching the 8-byte base offset (the CRC does not cover it; the
      caller's buffer is never modified); without, their base offsets must be >= next_offset
      and increasing (else InvalidOffsetError). All batches go to the file in one write;
      index entries follow Kafka's recovery rule per batch: an offset-index entry
      ``(batch.last_offset, batch_position)`` and a time-index entry ``(max timestamp so far,
      its offset)`` when more than ``index_interval_bytes`` were appended since the last entry.
      Raises ReadOnlyError / LogClosedError as fits; nothing is written when any batch fails.
      ``checked=True`` (keyword, default False): the caller has already checked each batch's
      CRC32C and its records as Kafka's LogValidator does (the Log: its validator for a
      client's batches, its own encoder for the rest), so the segment checks the framing
      (sizes, magic, last_offset_delta, offsets, max_message_bytes) but neither the CRC nor
      the records area again: one pass over the bytes instead of three for a produce request.
      A replica's append and the cleaner's leave it False.
    * ``translate_offset(offset) -> (position, batch_base_offset, batch_size_bytes) | None``:
      the first batch whose last offset >= offset (index lookup, then a header-only scan).
    * ``read(offset, max_bytes, *, max_position=None, min_one_batch=True) -> memoryview``:
      whole batches from ``translate_offset(offset)`` up to ``max_bytes`` (at least one batch
      when min_one_batch, even if larger), never past ``max_position``; empty when offset >=
      next_offset. Every call returns a view of its own, an empty one too: releasing it (or
      ``recover()``, ``truncate_to()``) never invalidates another caller's. A writer's view is zero-copy (a read-only view of an mmap of the .log);
      a ``read_only`` segment never maps the .log (another process may truncate it, which
      would be SIGBUS) and returns a view over bytes read with ``pread``. A header that
      cannot be parsed below the segment's end is CorruptSegmentError, never an end of data.
    * ``read_record(offset, *, check_crcs=True) -> Record | None``: the one record with
      ``offset`` (the batch's CRC32C checked once per batch unless ``check_crcs`` is false:
      CorruptSegmentError(REASON_CRC_MISMATCH)), or None when
      no data record has it (offset outside ``[base_offset, next_offset)``, a gap left by
      compaction, or a control batch). Index lookup and header scan to the batch as in
      ``read``, then ``Batch.record_at``: the records before it are skipped by their length
      prefixes (no per-record objects) and only that record is built; a compressed batch is
      decompressed. Raises as ``Batch.record_at``. The point read of a log (Log.read_record).
    * ``read_range(offset, max_bytes, *, max_position=None, min_one_batch=True) ->
      (position, size_bytes)``: the same bytes as a file range (for sendfile and a broker).
    * ``sendfile(out_fd, offset, max_bytes, *, max_position=None) -> (bytes_sent,
      next_offset)``: whole batches to a socket or file with sendfile(2); loops until all are
      sent (blocking fds; BlockingIOError propagates for non-blocking ones).
    * ``batches(start_position=0)``: iterate Batch objects over the file.
    * ``find_offset_by_timestamp(timestamp_ms, starting_offset=0) -> (timestamp_ms, offset) |
      None``: first record with timestamp >= target and offset >= starting_offset.
    * ``truncate_to(offset) -> int``: drop every batch whose base offset >= offset; returns
      bytes removed. ViewsOutstandingError if a live read() view maps the removed range.
    * ``recover() -> RecoveryResult`` with ``valid_bytes, truncated_bytes, reason, position``
      (reason '' when nothing was cut, else a REASON_* string; position of the first invalid
      byte): validate every batch from 0 (length, magic, CRC32C, offsets increasing and >=
      base_offset, records area consistent), truncate at the first invalid byte, rebuild both
      indexes, trim them. A partial tail batch is cut with REASON_TRUNCATED.
    * ``roll_reason(incoming_bytes, incoming_last_offset, segment_bytes) -> str | None``:
      ``"size"`` if size_bytes > segment_bytes - incoming_bytes (and size_bytes > 0),
      ``"offset_index_full"``, ``"time_index_full"``, ``"offset_overflow"`` (incoming last
      offset - base_offset not in [0, INT32_MAX]); None when it may take the append.
    * ``on_become_inactive()``: final time-index entry (skip_full_check), trim of indexes,
      and both indexes synced (msync): a rolled segment's indexes are trusted on open.
    * ``flush()``: fdatasync the .log only. The indexes are derived data: every segment at or
      above the recovery point has them rebuilt by ``recover()`` after an unclean shutdown,
      and an index that lost unsynced pages only ends earlier (entries count up to the first
      all-zero one), so it is correct, just sparser. They are synced when they become
      trusted: on roll (``on_become_inactive``) and on ``close()``. ``close()``: trim indexes,
      sync and close files (views already handed out stay valid). ``delete()``: close and
      remove all its files. ``release()``: close the descriptor and unmap the files without
      trimming, syncing or writing an index entry, leaving them as a stopped process would
      (what the Store's file cache does to an idle segment it will open again; the next
      open reads them); blocks reserved past EOF are given back; views stay valid.
    * ``rename_suffix(new_suffix)``: rename every file from the current suffix to new_suffix.
    * ``views_outstanding() -> bool``: True while a view returned by ``read()`` is alive (its
      mapping is kept until it is released, and ``truncate_to`` checks it); mappings no view
      holds are released on the way. A read-only segment maps nothing: always False. The
      Store's file cache never closes a segment for which this is True.
    * ``refresh()`` (read-only): pick up batches another process appended; only whole batches
      become visible. ``last_modified_ms``: the .log mtime.
    """

    indexes_need_rebuild: bool
    #: The most descriptors one open segment holds (native: 1, its ``.log``; pure: 4, as
    #: Python's mmap keeps a duplicate of the descriptor of each mapping): what the Store's
    #: file cache counts to stay within the open-files limit.
    open_descriptors_max: ClassVar[int]

    @classmethod
    def open(cls, dir_path: PathLike, base_offset: int, *, create: bool = False,
             read_only: bool = False, index_interval_bytes: int = 4096,
             max_index_bytes: int = 10485760, max_message_bytes: int = 1048588,
             file_suffix: str = "") -> Segment:
        """Open (or with ``create=True`` create) the segment at ``base_offset`` in
        ``dir_path`` (see the class docstring)."""

    @property
    def dir_path(self) -> str: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def index_interval_bytes(self) -> int: ...
    @property
    def max_index_bytes(self) -> int: ...
    @property
    def max_message_bytes(self) -> int: ...
    @property
    def file_suffix(self) -> str: ...
    @property
    def offset_index(self) -> OffsetIndex | None: ...
    @property
    def time_index(self) -> TimeIndex | None: ...
    @property
    def log_path(self) -> str: ...
    @property
    def index_path(self) -> str: ...
    @property
    def time_index_path(self) -> str: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def max_timestamp_ms(self) -> int: ...
    @property
    def offset_of_max_timestamp(self) -> int: ...
    @property
    def first_batch_timestamp_ms(self) -> int: ...
    @property
    def last_modified_ms(self) -> int: ...

    def append(self, data: BytesLike | list[BytesLike] | tuple[BytesLike, ...], *,
               assign_offsets: bool = True,
               partition_leader_epoch: int | None = None,
               checked: bool = False) -> AppendResult:
        """Validate and write one or more whole batches (see the class docstring); with
        ``partition_leader_epoch`` (an int32) every batch is written with it in its
        partitionLeaderEpoch field (bytes 12-15, outside the CRC), as a leader stamps what it
        appends, without modifying or copying the caller's buffers; ``checked``: the CRCs and
        records were checked by the caller (the class docstring)."""

    def translate_offset(self, offset: int) -> tuple[int, int, int] | None:
        """``(position, batch_base_offset, batch_size_bytes)`` of the first batch whose last
        offset >= ``offset``, or None."""

    def read(self, offset: int, max_bytes: int, *, max_position: int | None = None,
             min_one_batch: bool = True) -> memoryview:
        """Whole batches from the one holding ``offset``; a fresh (never shared) view, empty
        when there is nothing to read."""

    def read_span(self, offset: int, max_bytes: int, *, max_position: int | None = None,
                  min_one_batch: bool = True) -> tuple[memoryview, int, int]:
        """``(view, position, next_offset)``: what ``read`` returns, its position in the .log
        and the offset after its last batch (-1: a read-only segment's file came up short)."""

    def read_record(self, offset: int, *, check_crcs: bool = True) -> Record | None:
        """The one data record with ``offset``, or None."""

    def read_value(self, offset: int, default: Any = None, *,
                   check_crcs: bool = True) -> bytes | None | Any:
        """The value (None for a null value) of the data record with ``offset``, or
        ``default`` when there is none: ``read_record``'s checks and errors."""

    def read_range(self, offset: int, max_bytes: int, *, max_position: int | None = None,
                   min_one_batch: bool = True) -> tuple[int, int]:
        """``(position, size_bytes)`` in the .log of the bytes ``read`` would return."""

    def sendfile(self, out_fd: int, offset: int, max_bytes: int, *,
                 max_position: int | None = None) -> tuple[int, int]:
        """``(bytes_sent, next_offset)`` after sending whole batches to ``out_fd``."""

    def batches(self, start_position: int = 0) -> Iterator[Batch]:
        """The Batch objects of the .log from ``start_position``."""

    def find_offset_by_timestamp(self, timestamp_ms: int,
                                 starting_offset: int = 0) -> tuple[int, int] | None:
        """``(timestamp_ms, offset)`` of the first record at or after both targets, or None."""

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose base offset >= ``offset``; the bytes removed."""

    def recover(self) -> RecoveryResult:
        """Validate every batch, cut at the first invalid byte, rebuild the indexes."""

    def roll_reason(self, incoming_bytes: int, incoming_last_offset: int,
                    segment_bytes: int) -> str | None:
        """Why this segment must roll before the append, or None."""

    def resize_indexes(self, max_index_bytes: int | None = None) -> None:
        """Resize both indexes (default: to ``max_index_bytes`` given at open)."""

    def on_become_inactive(self) -> None:
        """Final time-index entry, trim and sync of both indexes (on roll)."""

    def flush(self) -> None:
        """fdatasync the .log (the indexes are derived: see the class docstring)."""

    def refresh(self) -> None:
        """Read-only: pick up whole batches another process appended."""

    def close(self) -> None:
        """Trim the indexes, sync and close the files; idempotent."""

    def release(self) -> None:
        """Close without trimming or syncing anything (see the class docstring)."""

    def delete(self) -> None:
        """Close and remove every file of the segment."""

    def rename_suffix(self, new_suffix: str) -> None:
        """Rename every file from the current suffix to ``new_suffix``."""

    def views_outstanding(self) -> bool:
        """True while a ``read()`` view of this segment is alive (see the class docstring)."""

    def __enter__(self) -> Self: ...
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None: ...


class KeyMap(Protocol):
    """The cleaner's offset map (Kafka's ``SkimpyOffsetMap``): record key
    -> latest offset, in a fixed amount of memory. ``seglog.pure.keymap`` documents the design;
    both backends fill their tables identically, slot by slot.

    ``KeyMap(memory_bytes_max)`` allocates two numpy arrays (uint64 key hashes, int64 offsets;
    16 bytes per slot) once: ``slots`` is the largest prime <= ``memory_bytes_max // 16``,
    ``max_entries = slots * 9 // 10`` (Kafka's 0.9 load factor). ValueError when that is < 1.
    Keys are identified by their XXH64 hash (seed 0) only: two keys with the same 64-bit hash
    count as one key, the risk Kafka takes with MD5. Not thread-safe.

    * ``put(key, offset) -> bool``: store ``offset`` (>= 0, else ValueError) for ``key``
      (bytes-like); ``latest_offset = offset``. False, changing nothing, when ``key`` is new and
      ``size == max_entries`` (updates of present keys always succeed).
    * ``get(key) -> int``: the stored offset, or -1.
    * ``put_batch_keys(data, *, start_offset=0) -> bool``: put every keyed record with offset
      >= start_offset of the RecordBatch at the start of ``data`` (control batches put
      nothing; compressed ones are decompressed); False when the map filled on the way
      (``latest_offset`` is then the last offset put). CorruptRecordError for a truncated
      batch or malformed record framing. The native twin walks the records in C.
    * ``retain_mask(data, *, now_ms) -> (mask, kept_count, tombstone_kept)``: the cleaner's
      per-record decision for the batch at the start of ``data`` (Kafka's
      ``shouldRetainRecord``, §5.3.4): ``mask`` a numpy bool array in record order; a record is
      kept if its offset > ``latest_offset``, else dropped if keyless, else kept iff offset >=
      ``get(key)`` and (it has a value, or the batch has no delete horizon, or now_ms <
      horizon). ``tombstone_kept``: a kept record has a null value. Control batches keep all.
    * ``update_latest_offset(offset)``; ``clear()`` (keeps the memory).
    * Attributes: ``memory_bytes_max``, ``slots``, ``max_entries``, ``size``,
      ``latest_offset`` (-1 when nothing was put), ``utilization`` (size / slots), ``lookups``
      and ``probes`` (collision counters), ``hashes`` and ``offsets`` (the arrays; read only).
    * Module-level in ``<backend>.keymap``: ``key_hash(key) -> int`` (XXH64, seed 0),
      ``slots_for_memory(memory_bytes_max)``, ``max_entries_for_slots(slots)``.
    """

    def __init__(self, memory_bytes_max: int) -> None:
        """Allocate the tables once (ValueError when fewer than one entry fits)."""

    @property
    def hashes(self) -> NDArray[np.uint64]: ...
    @property
    def offsets(self) -> NDArray[np.int64]: ...
    @property
    def memory_bytes_max(self) -> int: ...
    @property
    def slots(self) -> int: ...
    @property
    def max_entries(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def latest_offset(self) -> int: ...
    @property
    def lookups(self) -> int: ...
    @property
    def probes(self) -> int: ...
    @property
    def utilization(self) -> float: ...

    def __len__(self) -> int:
        """``size``."""

    def put_hash(self, h: int, offset: int) -> bool:
        """``put`` for a key given by its hash (``key_hash(key)``)."""

    def put(self, key: BytesLike, offset: int) -> bool:
        """Store ``offset`` for ``key``; False when a new key does not fit."""

    def get(self, key: BytesLike) -> int:
        """The stored offset for ``key``, or -1."""

    def update_latest_offset(self, offset: int) -> None:
        """Set ``latest_offset``."""

    def clear(self) -> None:
        """Empty the map (keeps the memory)."""

    def put_batch_keys(self, data: BytesLike, *, start_offset: int = 0) -> bool:
        """Put the keyed records of the batch at the start of ``data``; False when full."""

    def retain_mask(self, data: BytesLike, *,
                    now_ms: int) -> tuple[NDArray[np.bool_], int, bool]:
        """``(mask, kept_count, tombstone_kept)`` for the batch at the start of ``data``."""


class KeyMapModule(Protocol):
    """``<backend>.keymap``, the one backend submodule the Python layer uses (the cleaner sizes
    its map with the constants before it builds one)."""

    #: Bytes of memory one slot takes: a uint64 hash and an int64 offset.
    SLOT_BYTES: int
    #: Kafka's dedupe buffer load factor, as the integer fraction the map fills up to.
    LOAD_FACTOR_NUMERATOR: int
    LOAD_FACTOR_DENOMINATOR: int
    #: Offset stored in an empty slot.
    EMPTY_OFFSET: int

    @property
    def KeyMap(self) -> type[_KeyMap]: ...  # noqa: N802 - the class, as the module names it

    def key_hash(self, key: BytesLike) -> int:
        """XXH64 (seed 0) of the key bytes."""

    def slots_for_memory(self, memory_bytes_max: int) -> int:
        """The largest prime <= ``memory_bytes_max // SLOT_BYTES`` (0 when none)."""

    def max_entries_for_slots(self, slots: int) -> int:
        """``slots * LOAD_FACTOR_NUMERATOR // LOAD_FACTOR_DENOMINATOR``."""


class RecordBuffer(Protocol):
    """The records of one producer batch still open, as columns (``<backend>.accumulator``).

    ``append`` copies one record in (one call per record, no per-record object kept);
    ``size_bytes`` is Kafka's producer estimate before compression (61 bytes per batch, per
    record 36 bytes of overhead + key + value + the caller's ``extra_bytes`` for headers);
    ``columns`` gives records ``start .. end-1`` in the ``(data, lengths)`` form of
    ``encode_batch``. Not thread-safe."""

    @property
    def record_count(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def has_keys(self) -> bool: ...
    @property
    def sealed(self) -> bool: ...

    def seal(self) -> None:
        """Close the buffer to appends (its batch is being written)."""

    def append(self, key: BytesLike | None, value: BytesLike | None, timestamp_ms: int,
               extra_bytes: int = 0) -> int:
        """Copy one record in and return its index; InvalidRecordError for a key or value
        that is not bytes-like (nothing is appended then)."""

    def columns(self, start: int = 0, end: int = -1) -> tuple[
            tuple[BytesLike, NDArray[np.int64]], tuple[BytesLike, NDArray[np.int64]] | None,
            NDArray[np.int64]]:
        """``(values, keys or None, timestamps_ms)`` of records ``start .. end-1``. The data
        are bytes-like: bytes in the pure twin, read-only memoryviews of the buffer's own
        memory in the native one (no copy; an append that must grow the buffer while one is
        alive raises BufferError)."""

    def __len__(self) -> int: ...


class BatchResult(Protocol):
    """The outcome of one producer batch, shared by its records' futures: parts ``(first
    record index, first offset or -1, error or None)`` given once by ``complete``, and one
    ``threading.Event`` set then. Thread-safe."""

    @property
    def event(self) -> threading.Event: ...
    @property
    def completed(self) -> bool: ...

    def complete(self, parts: Iterable[tuple[int, int, BaseException | None]]) -> None:
        """Give the outcome (parts in any order) and wake every waiting future."""

    def offset_of(self, index: int) -> int:
        """The offset record ``index`` got; raises the error of its part."""

    def error_of(self, index: int) -> BaseException | None:
        """The error that failed record ``index``, or None."""


class SendFuture(Protocol):
    """The pending result of one ``Producer.send`` (record ``index`` of a batch whose
    :class:`BatchResult` it holds). Thread-safe."""

    def __init__(self, result: BatchResult, index: int, topic: Any, partition: int,
                 timestamp_ms: int) -> None:
        """The future of record ``index`` of the batch whose result is ``result``."""

    @property
    def topic(self) -> Any: ...
    @property
    def partition(self) -> int: ...
    @property
    def timestamp_ms(self) -> int: ...
    @property
    def offset(self) -> int: ...

    def done(self) -> bool:
        """Whether the batch was written (or failed)."""

    def result(self, timeout_ms: int | None = None) -> Any:
        """Wait up to ``timeout_ms`` (None: no limit) and return the record's
        ``RecordMetadata``; the batch's error, TimeoutError, or TypeError / ValueError for a
        bad ``timeout_ms``."""


class TopicSlots(Protocol):
    """One topic as the producer's Sender sees it: partition count, compacted, its
    TopicPartitions, the open batch per partition and the sticky partition of keyless
    records (Kafka's BuiltInPartitioner)."""

    def __init__(self, topic: Any, partitions: int, compacted: bool, tps: tuple[Any, ...], *,
                 sticky_batch_bytes: int, rng: Any) -> None:
        """``rng``: a ``random.Random`` for the sticky partition's draws."""

    @property
    def topic(self) -> Any: ...
    @property
    def partitions(self) -> int: ...
    @property
    def compacted(self) -> bool: ...
    @property
    def tps(self) -> tuple[Any, ...]: ...

    def keyless_partition(self) -> int:
        """The sticky partition for the next keyless record."""

    def keyless_appended(self, appended_bytes: int, switch_allowed: bool) -> None:
        """Count bytes on the sticky partition; move on when it is time."""


class ReentrantLock(Protocol):
    """The producer's lock, owned by its Sender: ``threading.RLock``'s behaviour (the holder
    may take it again and must release it as often), usable by ``threading.Condition``."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock; False when not blocking and held elsewhere, or after ``timeout``."""

    def release(self) -> None:
        """Give one hold back; RuntimeError when the caller does not hold it."""

    def __enter__(self) -> bool: ...
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None, /) -> None: ...


class Sender(Protocol):
    """The common case of ``Producer.send`` in one call (bytes key and value, no explicit
    partition, timestamp or headers); the rest goes to the producer's full send.
    ``enabled`` False or ``errors_pending`` True sends every record to the full send."""

    enabled: bool
    errors_pending: bool

    def __init__(self, *, fallback: Callable[..., Any],
                 open_batch: Callable[[Any], Any], write: Callable[[Any], Any],
                 batch_size_bytes: int, max_request_bytes: int, linger_zero: bool) -> None:
        """``fallback``: the producer's full send; ``open_batch(tp)`` the partition's open
        batch; ``write(batch)`` hands a full batch on."""

    @property
    def lock(self) -> ReentrantLock:
        """The producer's lock, taken by ``send`` around each record."""

    def slots(self, topic: str) -> TopicSlots | None:
        """The slots of ``topic``, or None."""

    def set_slots(self, topic: str, slots: Any) -> None:
        """Register (or replace) ``topic``'s slots."""

    def send(self, topic: str, value: BytesLike | None = None, key: BytesLike | None = None,
             *, partition: int | None = None, timestamp_ms: int | None = None,
             headers: Any = None) -> Any:
        """``Producer.send``."""


class AccumulatorModule(Protocol):
    """``<backend>.accumulator``: Kafka's murmur2, the producer's open-batch buffer, and the
    Sender that runs the common case of ``Producer.send`` in one call."""

    @property
    def RecordBuffer(self) -> type[RecordBuffer]: ...  # noqa: N802 - the class
    @property
    def TopicSlots(self) -> type[TopicSlots]: ...  # noqa: N802
    @property
    def Sender(self) -> type[Sender]: ...  # noqa: N802
    @property
    def BatchResult(self) -> type[BatchResult]: ...  # noqa: N802
    @property
    def SendFuture(self) -> type[SendFuture]: ...  # noqa: N802
    @property
    def ReentrantLock(self) -> type[ReentrantLock]: ...  # noqa: N802

    def murmur2(self, data: BytesLike) -> int:
        """Kafka's ``Utils.murmur2``: a signed 32-bit int."""

    def partition_for_key(self, key: BytesLike, num_partitions: int) -> int:
        """``(murmur2(key) & 0x7fffffff) % num_partitions`` (Kafka's partitionForKey)."""


class WireModule(Protocol):
    """``<backend>.wire``: Kafka's request framing on the broker's hot path. Each reader is a
    fast path: the fields of a well-formed request of the common shape, None for anything
    else (the caller's full parser then reads it and refuses what is malformed, so a fast
    path may decline but never disagree)."""

    def read_request_header(self, frame: BytesLike, flexible: bool
                            ) -> tuple[int, int, int, str | None, int] | None:
        """``(api_key, api_version, correlation_id, client_id, body_offset)`` of the request
        header at the start of ``frame`` (v2 when ``flexible``, its tagged-field section
        empty; else v1); ``client_id`` None for a null one. None for any other frame."""

    def read_produce_single(self, version: int, body: BytesLike) -> tuple[
            str | None, int, int, str | None, bytes | None, int, memoryview | None] | None:
        """``(transactional_id, acks, timeout_ms, topic_name, topic_id, partition, records)``
        of a Produce request body of ``version`` (3..13) naming one topic with one partition,
        every tagged-field section empty: ``topic_name`` None from v13, ``topic_id`` the 16
        bytes of the topic's id from v13 (None for the zero uuid, and before v13),
        ``records`` a view of ``body`` (None when null). None for any other body."""

    def encode_produce_single(self, version: int, topic: str | BytesLike | None,
                              partition: int, error_code: int, base_offset: int,
                              log_append_time_ms: int, log_start_offset: int) -> bytes:
        """The body of a Produce response of ``version`` (3..13), one topic (its name before
        v13, its id's 16 bytes or None for the zero uuid from v13) of one partition, no
        record errors, a null error message, no throttle: the general encoder's bytes for
        that answer. ValueError for a version outside 3..13 or an id not of 16 bytes,
        TypeError for a name that is not a str."""

    def frame_buffer(self, size_bytes: int) -> bytearray:
        """A bytearray of ``size_bytes`` for a request the connection fills as it arrives
        (its size read from the frame's prefix): its contents undefined until written (the
        native one is not zeroed: every byte is written before it is read). ValueError for
        a negative size."""


# The Backend's attributes are named after the classes; these aliases keep the annotations
# below from resolving to the attributes themselves.
_Record = Record
_ConsumerRecord = ConsumerRecord
_Batch = Batch
_Columns = Columns
_Segment = Segment
_OffsetIndex = OffsetIndex
_TimeIndex = TimeIndex
_KeyMap = KeyMap


class Backend(Protocol):
    """A backend module: ``seglog.pure`` or ``seglog._native`` (what ``get_backend`` returns).

    Its other attributes are its own submodules (``codec``, ``index``, ``segment``, ...):
    implementation files, not part of the contract, except ``keymap``, ``accumulator`` and
    ``wire``."""

    #: ``"pure"`` or ``"native"``.
    name: str

    @property
    def Record(self) -> type[_Record]: ...  # noqa: N802 - module attributes named as classes
    @property
    def ConsumerRecord(self) -> type[_ConsumerRecord]: ...  # noqa: N802
    @property
    def Batch(self) -> type[_Batch]: ...  # noqa: N802
    @property
    def Columns(self) -> type[_Columns]: ...  # noqa: N802
    @property
    def Segment(self) -> type[_Segment]: ...  # noqa: N802
    @property
    def OffsetIndex(self) -> type[_OffsetIndex]: ...  # noqa: N802
    @property
    def TimeIndex(self) -> type[_TimeIndex]: ...  # noqa: N802
    @property
    def KeyMap(self) -> type[_KeyMap]: ...  # noqa: N802
    @property
    def keymap(self) -> KeyMapModule: ...
    @property
    def accumulator(self) -> AccumulatorModule: ...
    @property
    def wire(self) -> WireModule: ...

    def crc32c(self, data: BytesLike, crc: int = 0) -> int:
        """CRC-32C (Castagnoli) of any bytes-like ``data``, continuing from ``crc``."""

    def encode_batch(
        self,
        values: RecordColumn,
        keys: RecordColumn | None = None,
        timestamps_ms: Timestamps = None,
        headers: HeaderColumn = None,
        *,
        base_offset: int = 0,
        compression: str | int = "none",
        compression_level: int | None = None,
        timestamp_type: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        partition_leader_epoch: int = -1,
        delete_horizon_ms: int = -1,
        offset_deltas: OffsetDeltas = None,
        last_offset_delta: int | None = None,
    ) -> bytes:
        """Encode one RecordBatch v2 (magic 2).

        values/keys: a sequence of bytes-like or None, a 2-D C-contiguous uint8 numpy array
        (one row per record), or a ``(data, lengths)`` pair (one bytes-like buffer and an
        integer numpy array of lengths, -1 for null, summing to the used bytes of data).
        keys None means every key is null. timestamps_ms: None (wall clock, read once per
        batch), an int for every record, or a sequence/int64 array. headers: None or one
        sequence of ``(str, bytes | None)`` pairs per record.
        The batch's base timestamp is the first record's timestamp (Kafka's builder), or
        ``delete_horizon_ms`` when that is >= 0 (attribute bit 6); max timestamp is the
        largest record timestamp. Record attributes are 0. Raises InvalidRecordError for a
        value/key that is not bytes-like (message names the record index), mismatched column
        lengths, an empty batch, or a header key that is not str; UnsupportedCompressionError.

        offset_deltas / last_offset_delta (for the cleaner, which re-encodes the records it keeps
        with their original offsets, Kafka's ``MemoryRecords.buildRetainedRecordsInto``):
        ``offset_deltas`` is None (records get deltas 0, 1, ..., n-1) or a sequence / integer
        numpy array of n strictly increasing ints in [0, INT32_MAX], each record's
        ``offset - base_offset``, written as the record's offsetDelta. ``last_offset_delta`` is
        None (the last record's delta) or an int >= the last record's delta and <= INT32_MAX,
        written as the header's lastOffsetDelta (Kafka's ``overrideLastOffset``: a rebuilt batch
        keeps its original last offset, so ``next_offset`` and sequence ranges survive).
        InvalidRecordError when the deltas are not increasing, out of range, or their count is
        not the record count.
        """

    def encode_control_batch(
        self,
        control_type: int,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int = 0,
        base_offset: int = 0,
        timestamp_ms: int | None = None,
        partition_leader_epoch: int = -1,
        timestamp_type: int = 0,
        delete_horizon_ms: int = -1,
    ) -> bytes:
        """A 78-byte transactional control batch holding one commit (1) or abort (0) marker;
        with ``delete_horizon_ms`` >= 0 (the cleaner's kept marker) the delete-horizon bit is
        set and the base timestamp is the horizon, the record keeping its own timestamp."""

    def check_client_batch(self, buffer: BytesLike, lowest_allowed_ms: int,
                           highest_allowed_ms: int, max_message_bytes: int,
                           keys_required: bool, compression_id: int) -> _Batch | None:
        """The validator's fast path for a produce request's records: the Batch of
        ``buffer`` when it is exactly one whole batch a client may append as it is (magic 2,
        a valid CRC32C, at most ``max_message_bytes``, base offset 0, not a control batch,
        at least one record, a record count equal to last_offset_delta + 1 and to the records
        parsed, record offsets 0..count-1, a producer id only with a base sequence >= 0,
        CreateTime, every record timestamp within ``lowest_allowed_ms`` ..
        ``highest_allowed_ms``, the header's max timestamp equal to the records' largest, no
        keyless record when ``keys_required``, codec ``compression_id`` unless -1); else None,
        never an error for bad bytes (the full validator then rewrites or refuses them)."""

    def iter_batches(self, buffer: BytesLike, *, max_batch_bytes: int | None = None,
                     check_offsets: bool = False) -> Iterator[_Batch]:
        """Walk the batches in ``buffer`` (Kafka's FileLogInputStream rules, §1.7): stop silently
        when fewer than 17 bytes or a partial batch remain; raise CorruptRecordError for a
        batch_length < 14 (REASON_BATCH_TOO_SMALL), > max_batch_bytes (REASON_BATCH_TOO_LARGE)
        or a magic other than 2 (REASON_BAD_MAGIC), a last offset outside int64
        (REASON_BAD_LAST_OFFSET_DELTA), and with ``check_offsets`` a base offset not above the
        previous batch's last offset (REASON_OFFSETS_NOT_INCREASING). CRCs are not checked here."""

    def decode_columns(self, buffer: BytesLike, *, max_records: int | None = None,
                       check_crcs: bool = True, check_offsets: bool = False,
                       max_decompressed_bytes: int = DECOMPRESSED_BYTES_MAX_DEFAULT,
                       ) -> _Columns:
        """All records of every whole batch in ``buffer`` (up to ``max_records``, whole batches
        are decoded but columns are cut) as one Columns object. Control batches are skipped.
        Every batch decoded is CRC-checked unless ``check_crcs`` is false; offsets and
        decompression are checked as in ``iter_batches`` and ``Batch.records``."""

    def drop_mapped_pages(self, buffer: BytesLike) -> int:
        """Drop the pages of a writer segment's ``.log`` mapping that ``buffer`` (a view from
        ``Segment.read``, or a contiguous slice of one) covers from this process's page
        tables, once the caller is done with the bytes (a broker, after handing a Fetch
        response to its socket): ``madvise(MADV_DONTNEED)`` on the range widened to whole
        2 MiB blocks, one more before it; ranges under 1 MiB are gathered per mapping and
        dropped together once they span 1 MiB, or when a range far from them comes. The bytes
        stay in the page cache and every view of them stays valid: a later access faults the
        page back in (see ``seglog.pure.segment``). Returns the bytes, in whole pages, of the
        ranges this call dropped (0 when the range waits), or 0 without doing anything when
        ``buffer`` is anything else: bytes, a read-only segment's pread copy, an empty read, a
        released view, a view of another backend's segment. OSError when madvise fails."""
