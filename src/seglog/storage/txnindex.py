"""The transaction index: one segment's aborted transactions (Kafka's ``TransactionIndex``).

A ``<base_offset>.txnindex`` file sits next to each segment. It is a plain array of 34-byte
big-endian entries with no header (``AbortedTxn.java``)::

    version int16 (0) | producer_id int64 | first_offset int64 | last_offset int64 |
    last_stable_offset int64

One entry is appended for every transaction whose ABORT marker was written into the segment:
``first_offset`` is the transaction's first data offset (possibly in an earlier segment),
``last_offset`` the marker's offset, and ``last_stable_offset`` the log's LSO right after the
abort (the first offset of the earliest *other* open transaction, else ``last_offset + 1``).
Entries are appended in increasing ``last_offset`` order because markers are.

A read_committed fetch asks the index of the segment it starts in, then the later ones, for the
aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``; an entry whose
``last_stable_offset >= upper_bound_offset`` proves that no later segment can add one, so the
search stops there (:meth:`TransactionIndex.collect_aborted_txns`).

Like the other indexes this file is derived data: segment recovery rebuilds it from the log
(``reset()`` then one ``append`` per aborted transaction). Unlike the offset and time indexes it
is not preallocated, and the file is created only by the first append (Kafka's behaviour), so a
segment without aborted transactions has no ``.txnindex`` at all.

Differences from Kafka, all stricter: the last offset is recovered from the file when an index
is reopened (Kafka forgets it, so its first append after a reopen is not order-checked); the
version is read as the whole int16 (Kafka reads only its first byte, which equals the int16
only because 0 is the only version ever written); :meth:`TransactionIndex.sanity_check` also
rejects a partial trailing entry (Kafka's reader silently ignores it).
"""

from __future__ import annotations

import os
import threading
from typing import Iterator, NamedTuple

from ..errors import CorruptIndexError, InvalidOffsetError
from ..filenames import txn_index_file
from ..format import ABORTED_TXN_ENTRY, ABORTED_TXN_ENTRY_BYTES

#: The only entry version Kafka writes (``AbortedTxn.CURRENT_VERSION``).
ABORTED_TXN_VERSION = 0

assert ABORTED_TXN_ENTRY_BYTES == 34


class AbortedTxn(NamedTuple):
    """One aborted transaction as stored in a ``.txnindex`` (all offsets absolute).

    ``first_offset``: the transaction's first data offset; ``last_offset``: its ABORT marker's
    offset; ``last_stable_offset``: the log's LSO once the abort was written. Equality is by
    value (Kafka compares the entry bytes).
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        """The 34-byte entry (version 0)."""
        return ABORTED_TXN_ENTRY.pack(
            ABORTED_TXN_VERSION, self.producer_id, self.first_offset, self.last_offset,
            self.last_stable_offset,
        )

    @classmethod
    def from_bytes(cls, data, position: int = 0) -> "AbortedTxn":
        """Decode the entry at ``position`` of ``data``. CorruptIndexError for a version other
        than 0 or fewer than 34 bytes."""
        if len(data) - position < ABORTED_TXN_ENTRY_BYTES:
            raise CorruptIndexError(
                f"aborted transaction entry at position {position} needs "
                f"{ABORTED_TXN_ENTRY_BYTES} bytes, {len(data) - position} left")
        version, producer_id, first, last, lso = ABORTED_TXN_ENTRY.unpack_from(data, position)
        if version != ABORTED_TXN_VERSION:
            raise CorruptIndexError(
                f"unexpected aborted transaction version {version} at position {position}, "
                f"current version is {ABORTED_TXN_VERSION}")
        return cls(producer_id, first, last, lso)


class TxnIndexSearchResult(NamedTuple):
    """What one segment's index contributes to a read_committed fetch: the aborted
    transactions overlapping the range, and whether the search may stop (``is_complete``)."""

    aborted_txns: list
    is_complete: bool


class TransactionIndex:
    """The ``.txnindex`` of the segment at ``base_offset`` in ``dir_path``.

    ``TransactionIndex(dir_path, base_offset, *, file_suffix="")`` opens the file if it exists
    and creates nothing (the first :meth:`append` creates it). ``file_suffix`` (``".cleaned"``,
    ``".swap"``) follows the segment's own suffix. Attributes: ``dir_path``, ``base_offset``,
    ``file_suffix``, ``path``, ``last_offset`` (the last entry's last offset, or None).

    Thread-safety: every method takes an internal lock, so readers (collect) and the writer
    (append, truncate) may call from different threads. ``OSError`` propagates.
    """

    def __init__(self, dir_path: str | os.PathLike, base_offset: int, *, file_suffix: str = ""):
        self.dir_path = os.fspath(dir_path)
        self.base_offset = base_offset
        self.file_suffix = file_suffix
        self._lock = threading.Lock()
        self._fd: int | None = None
        self.last_offset: int | None = None
        entries = self._entries_locked()
        if entries:
            self.last_offset = entries[-1][0].last_offset

    # --- files ----------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """Current path of the file (it may not exist yet)."""
        return txn_index_file(self.dir_path, self.base_offset) + self.file_suffix

    def exists(self) -> bool:
        """True once the file exists (after the first append, or when it was found on open)."""
        return os.path.exists(self.path)

    def _open_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _read_all(self) -> bytes:
        if self._fd is None:
            try:
                with open(self.path, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                return b""
        size = os.fstat(self._fd).st_size
        chunks, position = [], 0
        while position < size:  # pread may return less than asked
            chunk = os.pread(self._fd, size - position, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
        return b"".join(chunks)

    def _entries_locked(self) -> list[tuple[AbortedTxn, int]]:
        """Every whole entry with its byte position; a partial tail is ignored (Kafka)."""
        data = self._read_all()
        whole = len(data) - len(data) % ABORTED_TXN_ENTRY_BYTES
        return [
            (AbortedTxn.from_bytes(data, position), position)
            for position in range(0, whole, ABORTED_TXN_ENTRY_BYTES)
        ]

    # --- writing --------------------------------------------------------------------------------

    def append(self, aborted_txn: AbortedTxn) -> None:
        """Append one entry (creating the file if needed). InvalidOffsetError unless its
        ``last_offset`` is greater than the previous entry's (Kafka's
        IllegalArgumentException: markers are appended in offset order)."""
        with self._lock:
            if self.last_offset is not None and aborted_txn.last_offset <= self.last_offset:
                raise InvalidOffsetError(
                    f"the last offset of appended transactions must increase: "
                    f"{aborted_txn.last_offset} is not greater than {self.last_offset} in "
                    f"{self.path}")
            fd = self._open_fd()
            data = aborted_txn.to_bytes()
            position = os.fstat(fd).st_size
            # A torn earlier write leaves a partial entry; write over it so entries stay aligned.
            position -= position % ABORTED_TXN_ENTRY_BYTES
            view = memoryview(data)
            while view:
                written = os.pwrite(fd, view, position)
                view, position = view[written:], position + written
            self.last_offset = aborted_txn.last_offset

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose ``last_offset >= offset`` (the entries from the first such
        one on, as Kafka: entries are ordered by last offset)."""
        with self._lock:
            new_last = None
            for txn, position in self._entries_locked():
                if txn.last_offset >= offset:
                    os.truncate(self.path, position)
                    self.last_offset = new_last
                    return
                new_last = txn.last_offset

    def reset(self) -> None:
        """Remove every entry (the file stays, empty). Used before recovery rebuilds it."""
        with self._lock:
            if os.path.exists(self.path):
                os.truncate(self.path, 0)
            self.last_offset = None

    def flush(self) -> None:
        """Fsync the file if it is open."""
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)

    def close(self) -> None:
        """Close the file descriptor; the object may still be used (it reopens lazily)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def delete(self) -> bool:
        """Close and delete the file; True if a file was deleted."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                return False
            return True

    def rename_suffix(self, new_suffix: str) -> None:
        """Rename the file from the current suffix to ``new_suffix`` (``""``, ``".cleaned"``,
        ``".swap"``, ``".deleted"``), as the segment's other files are; the object follows the
        file even if it does not exist yet."""
        with self._lock:
            old_path = self.path
            self.file_suffix = new_suffix
            if os.path.exists(old_path):
                os.replace(old_path, self.path)

    # --- reading --------------------------------------------------------------------------------

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry, in file order. CorruptIndexError for a bad version."""
        with self._lock:
            return [txn for txn, _ in self._entries_locked()]

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self.all_aborted_txns())

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries_locked())

    def collect_aborted_txns(self, fetch_offset: int,
                             upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``: entries
        with ``last_offset >= fetch_offset and first_offset < upper_bound_offset``, in file
        order. The result is complete (later segments need not be searched) as soon as an
        entry with ``last_stable_offset >= upper_bound_offset`` is seen; the scan stops there
        (Kafka's ``collectAbortedTxns``)."""
        found = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """CorruptIndexError if an entry's ``last_offset`` is below the segment's base offset
        (Kafka's check), an entry has a version other than 0, or the file ends in a partial
        entry. The loader answers it by recovering the segment, which rebuilds this index."""
        with self._lock:
            data = self._read_all()
            if len(data) % ABORTED_TXN_ENTRY_BYTES:
                raise CorruptIndexError(
                    f"transaction index {self.path} has {len(data)} bytes, not a multiple of "
                    f"{ABORTED_TXN_ENTRY_BYTES}")
            for position in range(0, len(data), ABORTED_TXN_ENTRY_BYTES):
                txn = AbortedTxn.from_bytes(data, position)
                if txn.last_offset < self.base_offset:
                    raise CorruptIndexError(
                        f"last offset of aborted transaction {txn} in index {self.path} is less "
                        f"than start offset {self.base_offset}")

    def __repr__(self) -> str:
        return f"<TransactionIndex {self.path} last_offset={self.last_offset}>"
