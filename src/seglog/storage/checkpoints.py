"""Kafka's small state files, read with Kafka's checks and replaced atomically.

A log directory keeps its durable bookkeeping in little text files beside the segments:

* the offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``) and a partition's
  ``leader-epoch-checkpoint``, all in Kafka's ``CheckpointFile`` format::

      0            <- version
      2            <- entry count
      clicks 0 42  <- one entry per line (here: topic partition offset)
      clicks 1 17

* ``partition.metadata`` (``version: 0`` / ``topic_id: <base64url uuid>``);
* ``meta.properties`` (Java properties: ``version``, ``cluster.id``, ``node.id`` or
  ``broker.id``, ``directory.id``);
* the clean-shutdown marker ``.kafka_cleanshutdown`` (``{"version":0,"brokerEpoch":N}``),
  whose presence alone lets the next open skip recovery.

Every writer replaces the file the same way (``atomic_write_bytes``): write ``<file>.tmp``,
fsync it, ``os.replace`` it over the file, fsync the directory. A reader therefore sees the
old file or the new one, never a mix. Readers raise
:class:`~seglog.errors.CorruptCheckpointError` where Kafka raises an ``IOException``
(unrecognised version, wrong entry count, malformed line). A missing file reads as empty
(Kafka creates an empty one when it opens a checkpoint); ``OSError`` propagates.

Thread safety: each checkpoint object serialises its own writes with a lock; keep one object
per file (two objects writing one path race on ``<file>.tmp``). Sources: ``CheckpointFile.java``,
``OffsetCheckpointFile.java``, ``LeaderEpochCheckpointFile.java``, ``PartitionMetadataFile.java``,
``MetaProperties.java``, ``CleanShutdownFileHandler.java``, ``Uuid.java``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Generic, Iterable, Mapping, TypeVar

from .. import filenames
from ..errors import CorruptCheckpointError, InvalidTopicError

T = TypeVar("T")

#: Version line of every offset and leader-epoch checkpoint Kafka writes.
CHECKPOINT_VERSION = 0
#: Suffix of the file written before the atomic rename.
TMP_SUFFIX = ".tmp"
#: Largest checkpoint file read (a limit on everything); a broker's is a few hundred KiB.
CHECKPOINT_BYTES_MAX = 64 * 1024 * 1024

# Java's \s: [ \t\n\x0B\f\r] (String.split(\s+) in the formatters).
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


# --- durable replacement ------------------------------------------------------------------------


def fsync_dir(dir_path: str | os.PathLike) -> None:
    """Fsync a directory so that a rename or unlink inside it survives a crash."""
    fd = os.open(dir_path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, sync_dir: bool = True,
                       mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` durably: write ``<path>.tmp``, fsync, rename, fsync dir.

    After a crash the file holds either its old content or ``data``; a stale ``.tmp`` may be
    left behind and is overwritten by the next write. ``sync_dir=False`` leaves the directory
    fsync to the caller, who must make it before relying on the new file (a Log's flush
    fsyncs its directory once for this file and its new segment files). ``mode``: the new
    file's permissions (0o600 for secrets: SCRAM credentials, delegation tokens). Raises
    ``OSError`` from the OS.
    """
    path = os.fspath(path)
    tmp_path = path + TMP_SUFFIX
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:  # os.write may write less than asked
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp_path, path)
    if sync_dir:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def _read_text(path: str) -> str | None:
    """The file's text, or None if it does not exist. Raises CorruptCheckpointError for a file
    that is too large or not UTF-8."""
    try:
        with open(path, "rb") as f:
            data = f.read(CHECKPOINT_BYTES_MAX + 1)
    except FileNotFoundError:
        return None
    if len(data) > CHECKPOINT_BYTES_MAX:
        raise CorruptCheckpointError(
            f"Checkpoint file ({path}) is larger than {CHECKPOINT_BYTES_MAX} bytes", path=path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptCheckpointError(f"Checkpoint file ({path}) is not UTF-8: {e}",
                                     path=path) from None


def _java_lines(text: str) -> list[str]:
    # BufferedReader.readLine: lines end at \n, \r or \r\n; no empty line after a final newline.
    return re.split(r"\r\n|\r|\n", text[:-1] if text.endswith("\n") else text) if text else []


def _parse_java_int(text: str, *, bits: int) -> int:
    """Integer.parseInt / Long.parseLong: optional sign, ASCII digits, in range; else ValueError."""
    if not _JAVA_INT.fullmatch(text):
        raise ValueError(text)
    value = int(text)
    lo, hi = (INT32_MIN, INT32_MAX) if bits == 32 else (INT64_MIN, INT64_MAX)
    if not lo <= value <= hi:
        raise ValueError(text)
    return value


def _java_split(line: str) -> list[str]:
    # String.split("\\s+"): a leading separator gives a leading "", trailing ones give nothing.
    parts = _JAVA_WHITESPACE.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


# --- Kafka's CheckpointFile ---------------------------------------------------------------------


class CheckpointFile(Generic[T]):
    """Kafka's versioned text checkpoint: a version line, a count line, one line per entry.

    ``to_line`` formats one entry; ``from_line`` parses one, returning None for a malformed
    line (it may also raise ``ValueError``, which counts as malformed). :meth:`read` raises
    :class:`CorruptCheckpointError` for a version other than ``version``, a count that does not
    match the entries, or a malformed line; an empty or missing file reads as ``[]``.
    """

    def __init__(self, path: str | os.PathLike, *, version: int,
                 to_line: Callable[[T], str], from_line: Callable[[str], T | None]):
        """Bind the checkpoint at ``path`` (nothing is read or created yet)."""
        self.path = os.fspath(path)
        self.version = version
        self._to_line = to_line
        self._from_line = from_line
        self._lock = threading.Lock()

    def write(self, entries: Iterable[T]) -> None:
        """Replace the file with ``entries`` (atomically and durably, see module docstring)."""
        lines = [self._to_line(entry) for entry in entries]
        text = f"{self.version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
        with self._lock:
            atomic_write_bytes(self.path, text.encode("utf-8"))

    def read(self) -> list[T]:
        """The entries in file order; ``[]`` if the file is missing or empty."""
        text = _read_text(self.path)
        lines = _java_lines(text) if text else []
        if not lines:
            return []
        read_version = self._header_int(lines[0])
        if read_version != self.version:
            raise CorruptCheckpointError(
                f"Unrecognised version:{read_version}, expected version: {self.version} "
                f"in checkpoint file at: {self.path}", path=self.path, line=lines[0])
        if len(lines) == 1:
            return []  # Kafka: a version line alone reads as no entries
        expected_count = self._header_int(lines[1])
        entries = []
        for line in lines[2:]:
            try:
                entry = self._from_line(line)
            except ValueError:
                entry = None
            if entry is None:
                raise self._malformed(line)
            entries.append(entry)
        if len(entries) != expected_count:
            raise CorruptCheckpointError(
                f"Expected {expected_count} entries in checkpoint file ({self.path}), but found "
                f"only {len(entries)}", path=self.path)
        return entries

    def _header_int(self, line: str) -> int:
        try:
            return _parse_java_int(line, bits=32)
        except ValueError:
            raise self._malformed(line) from None

    def _malformed(self, line: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(
            f"Malformed line in checkpoint file [{self.path}]: {line}", path=self.path, line=line)


def _offset_line(entry: tuple[tuple[str, int], int]) -> str:
    (topic, partition), offset = entry
    if not topic or _JAVA_WHITESPACE.search(topic):
        raise InvalidTopicError(f"Topic name {topic!r} cannot be written to a checkpoint")
    return f"{topic} {int(partition)} {int(offset)}"


def _parse_offset_line(line: str) -> tuple[tuple[str, int], int] | None:
    parts = _java_split(line)
    if len(parts) != 3:
        return None
    return (parts[0], _parse_java_int(parts[1], bits=32)), _parse_java_int(parts[2], bits=64)


class OffsetCheckpointFile:
    """An offset per topic partition: Kafka's ``OffsetCheckpointFile`` (version 0).

    Lines are ``topic partition offset``. Used for ``recovery-point-offset-checkpoint``,
    ``log-start-offset-checkpoint``, ``replication-offset-checkpoint`` (high watermarks) and
    ``cleaner-offset-checkpoint`` (first dirty offsets) in the root of a data directory; the
    names are in :mod:`seglog.filenames`.
    """

    def __init__(self, path: str | os.PathLike):
        """Bind the checkpoint at ``path``."""
        self._file: CheckpointFile = CheckpointFile(
            path, version=CHECKPOINT_VERSION, to_line=_offset_line, from_line=_parse_offset_line)

    @property
    def path(self) -> str:
        """The checkpoint's path."""
        return self._file.path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Replace the file with ``{(topic, partition): offset}``, in the mapping's order.

        Raises :class:`InvalidTopicError` for a topic name containing whitespace.
        """
        self._file.write(offsets.items())

    def read(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): offset}``; empty if the file is missing. A partition listed
        twice keeps its last offset (as Kafka's map does). Raises CorruptCheckpointError."""
        return dict(self._file.read())


@dataclass(frozen=True)
class EpochEntry:
    """A leader epoch and the first offset written in it (Kafka's ``EpochEntry``)."""

    epoch: int
    start_offset: int


def _parse_epoch_line(line: str) -> EpochEntry | None:
    parts = _java_split(line)
    if len(parts) != 2:
        return None
    return EpochEntry(_parse_java_int(parts[0], bits=32), _parse_java_int(parts[1], bits=64))


class LeaderEpochCheckpointFile:
    """A partition's leader epochs: Kafka's ``leader-epoch-checkpoint`` (version 0).

    Lines are ``epoch start_offset``, in increasing epoch order. The file lives in the
    partition directory.
    """

    def __init__(self, path: str | os.PathLike):
        """Bind the checkpoint at ``path`` (usually ``<partition dir>/leader-epoch-checkpoint``)."""
        self._file: CheckpointFile = CheckpointFile(
            path, version=CHECKPOINT_VERSION,
            to_line=lambda e: f"{int(e.epoch)} {int(e.start_offset)}",
            from_line=_parse_epoch_line)

    @property
    def path(self) -> str:
        """The checkpoint's path."""
        return self._file.path

    def write(self, entries: Iterable[EpochEntry]) -> None:
        """Replace the file with ``entries`` (in the given order)."""
        self._file.write(entries)

    def read(self) -> list[EpochEntry]:
        """The entries in file order; empty if the file is missing. Raises
        CorruptCheckpointError."""
        return self._file.read()


# --- Kafka's Uuid text form ---------------------------------------------------------------------

#: Kafka's ``Uuid.ZERO_UUID`` (no topic id) and ``Uuid.METADATA_TOPIC_ID``; never random ids.
ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)


def uuid_to_kafka_str(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: the 16 bytes, base64url, no padding (22 characters)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def uuid_from_kafka_str(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``; raises ValueError unless ``text`` is base64url of 16 bytes."""
    if len(text) > 24:
        raise ValueError(f"Input string with prefix {text[:24]!r} is too long to be decoded "
                         "as a base64 UUID")
    if not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise ValueError(f"Input string {text!r} is not base64url")
    try:
        raw = base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))
    except ValueError as e:
        raise ValueError(f"Input string {text!r} is not base64url: {e}") from None
    if len(raw) != 16:
        raise ValueError(f"Input string {text!r} decoded as having length of {len(raw)} bytes, "
                         "which is not equal to the expected length of 16")
    return uuid.UUID(bytes=raw)


def new_kafka_uuid() -> uuid.UUID:
    """A random id as Kafka's ``Uuid.randomUuid``: never ZERO_UUID or METADATA_TOPIC_ID, and
    never one whose text starts with "-" (it would look like a command-line flag)."""
    while True:
        value = uuid.uuid4()
        if value not in (ZERO_UUID, METADATA_TOPIC_ID) and not uuid_to_kafka_str(value).startswith("-"):
            return value


# --- partition.metadata -------------------------------------------------------------------------

PARTITION_METADATA_VERSION = 0


class PartitionMetadataFile:
    """A partition's ``partition.metadata``: its topic id (Kafka's ``PartitionMetadataFile``).

    Content: ``version: 0\\ntopic_id: <Uuid.toString()>`` (no final newline, as Kafka
    writes it). Reading follows Kafka: each line splits on whitespace into two parts; the
    version must be 0 and the topic id must not be the zero uuid.
    """

    def __init__(self, path: str | os.PathLike):
        """Bind the file at ``path`` (usually ``<partition dir>/partition.metadata``)."""
        self.path = os.fspath(path)
        self._lock = threading.Lock()

    def exists(self) -> bool:
        """Whether the file exists."""
        return os.path.exists(self.path)

    def write(self, topic_id: uuid.UUID, *, sync_dir: bool = True) -> None:
        """Record ``topic_id`` (atomically and durably: :func:`atomic_write_bytes`;
        ``sync_dir=False`` leaves the directory fsync to the caller, as there). Raises
        ValueError for the zero uuid."""
        data = self.encode(topic_id)
        with self._lock:
            atomic_write_bytes(self.path, data, sync_dir=sync_dir)

    @staticmethod
    def encode(topic_id: uuid.UUID) -> bytes:
        """The file's bytes for ``topic_id`` (for writers that batch several files, as
        :func:`atomic_write_many`). Raises ValueError for the zero uuid."""
        if topic_id == ZERO_UUID:
            raise ValueError("the zero uuid is not a topic id")
        text = f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {uuid_to_kafka_str(topic_id)}"
        return text.encode("utf-8")

    def read(self) -> uuid.UUID | None:
        """The topic id, or None if the file is missing. Raises CorruptCheckpointError for an
        unknown version, a malformed line or the zero uuid."""
        text = _read_text(self.path)
        if text is None:
            return None
        lines = _java_lines(text)
        version_line = lines[0] if lines else ""
        version_parts = _java_split(version_line)
        if len(version_parts) != 2:
            raise self._malformed(version_line)
        try:
            version = _parse_java_int(version_parts[1], bits=32)
        except ValueError:
            raise self._malformed(version_line) from None
        if version != PARTITION_METADATA_VERSION:
            raise CorruptCheckpointError(
                f"Unrecognized version of partition metadata file ({self.path}): {version}",
                path=self.path, line=version_line)
        id_line = lines[1] if len(lines) > 1 else ""
        id_parts = _java_split(id_line)
        if len(id_parts) != 2:
            raise self._malformed(id_line)
        try:
            topic_id = uuid_from_kafka_str(id_parts[1])
        except ValueError:
            raise self._malformed(id_line) from None
        if topic_id == ZERO_UUID:
            raise CorruptCheckpointError(
                f"Invalid topic ID in partition metadata file ({self.path})", path=self.path,
                line=id_line)
        return topic_id

    def _malformed(self, line: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(
            f"Malformed line in checkpoint file [{self.path}]: {line}", path=self.path, line=line)


def topic_id_to_record(dir_path: str, topic_id: uuid.UUID, *, exists: bool) -> uuid.UUID | None:
    """Kafka's ``UnifiedLog.initializeTopicId`` for the partition directory ``dir_path``: the
    topic id its ``partition.metadata`` still has to get, or None when the file names
    ``topic_id`` already. ``exists``: whether a listing just made saw the file (False: it is
    not read). Raises CorruptCheckpointError when the file names another topic id (Kafka's
    InconsistentTopicIdException) or is corrupt."""
    if not exists:
        return topic_id
    metadata = PartitionMetadataFile(os.path.join(dir_path, filenames.PARTITION_METADATA))
    found = metadata.read()
    if found is None:  # removed since the listing: written as a missing one
        return topic_id
    if found != topic_id:
        raise CorruptCheckpointError(
            f"{metadata.path} names topic id {uuid_to_kafka_str(found)}, but the log was "
            f"opened for topic id {uuid_to_kafka_str(topic_id)}", path=metadata.path)
    return None


# --- meta.properties ----------------------------------------------------------------------------


def _properties_escape(text: str, *, is_key: bool) -> str:
    # java.util.Properties.saveConvert (store(Writer): no \\uXXXX for non-ASCII).
    out = []
    for i, ch in enumerate(text):
        if ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        else:
            out.append(ch)
    return "".join(out)


def _properties_unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[i + 2:i + 6]):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


_PROPERTY_ENTRY = re.compile(r"((?:\\.|[^\\=: \t\f])*)[ \t\f]*[=:]?[ \t\f]*(.*)", re.S)


def parse_java_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``Properties.load``): ``#``/``!`` comments, ``key=value``,
    ``key: value`` or ``key value``, backslash escapes and line continuations."""
    entries: list[str] = []
    logical: list[str] = []
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(" \t\f")  # continuation lines lose their leading blanks too
        if not logical and (not line or line[0] in "#!"):
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:  # odd backslashes: continued
            logical.append(line[:-1])
            continue
        logical.append(line)
        entries.append("".join(logical))
        logical = []
    if logical:
        entries.append("".join(logical))
    props: dict[str, str] = {}
    for entry in entries:
        match = _PROPERTY_ENTRY.match(entry)
        assert match is not None  # the pattern matches any string
        props[_properties_unescape(match.group(1))] = _properties_unescape(match.group(2))
    return props


def format_java_properties(props: Mapping[str, str], *, now_s: float | None = None) -> str:
    """Java ``Properties.store(writer, "")`` text: an empty comment line, a date comment, then
    ``key=value`` lines (sorted by key here; Java's order is its hash table's)."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y",
                          time.gmtime(time.time() if now_s is None else now_s))
    lines = ["#", "#" + stamp]
    for key in sorted(props):
        lines.append(_properties_escape(key, is_key=True) + "="
                     + _properties_escape(props[key], is_key=False))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class MetaProperties:
    """A data directory's identity: Kafka's ``meta.properties`` (``MetaProperties.java``).

    ``version`` 0 (ZooKeeper era) stores the node id as ``broker.id`` and may lack both ids;
    ``version`` 1 (KRaft) stores ``node.id`` and requires ``cluster_id`` and ``node_id``.
    ``directory_id`` (Kafka 3.7+, a Kafka uuid) is optional in both.
    """

    version: int = 1
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: uuid.UUID | None = None

    def __post_init__(self) -> None:
        if self.version not in (0, 1):
            raise ValueError(f"Unknown meta.properties version {self.version}")
        if self.version == 1 and (self.cluster_id is None or self.node_id is None):
            raise ValueError("meta.properties version 1 needs cluster_id and node_id")

    def to_properties(self) -> dict[str, str]:
        """The property names and values Kafka writes (``MetaProperties.toProperties``)."""
        props = {"version": str(self.version)}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.node_id is not None:
            props["broker.id" if self.version == 0 else "node.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = uuid_to_kafka_str(self.directory_id)
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, path: str = "") -> "MetaProperties":
        """Parse as Kafka's ``MetaProperties.Builder``: a missing ``version`` is 0; other
        properties are ignored. Raises CorruptCheckpointError for a bad version, a bad or
        missing required id."""
        def fail(message: str) -> CorruptCheckpointError:
            return CorruptCheckpointError(f"{message} in {path or 'meta.properties'}", path=path)

        version_text = props.get("version", "0").strip()
        if version_text not in ("0", "1"):
            raise fail(f"Unknown meta.properties version '{version_text}'")
        version = int(version_text)
        node_key = "broker.id" if version == 0 else "node.id"
        node_id = None
        if node_key in props:
            try:
                node_id = _parse_java_int(props[node_key].strip(), bits=32)
            except ValueError:
                raise fail(f"Unable to read {node_key} as a base-10 number") from None
        elif version == 1:
            raise fail(f"Failed to find required property {node_key}.")
        cluster_id = props.get("cluster.id")
        if version == 1 and cluster_id is None:
            raise fail("cluster.id was not found.")
        directory_id = None
        if "directory.id" in props:
            try:
                directory_id = uuid_from_kafka_str(props["directory.id"])
            except ValueError as e:
                raise fail(f"Bad directory.id ({e})") from None
        return cls(version=version, cluster_id=cluster_id, node_id=node_id,
                   directory_id=directory_id)

    def write(self, dir_path: str | os.PathLike, *, now_s: float | None = None) -> str:
        """Write ``<dir_path>/meta.properties`` atomically and durably; return its path."""
        path = os.path.join(dir_path, filenames.META_PROPERTIES)
        atomic_write_bytes(path, format_java_properties(self.to_properties(), now_s=now_s)
                           .encode("utf-8"))
        return path

    @classmethod
    def read(cls, dir_path: str | os.PathLike) -> "MetaProperties | None":
        """Read ``<dir_path>/meta.properties``; None if it does not exist."""
        path = os.path.join(dir_path, filenames.META_PROPERTIES)
        text = _read_text(path)
        if text is None:
            return None
        return cls.from_properties(parse_java_properties(text), path=path)


# --- the clean-shutdown marker ------------------------------------------------------------------

CLEAN_SHUTDOWN_VERSION = 0


def write_clean_shutdown_marker(dir_path: str | os.PathLike, *, broker_epoch: int = -1) -> str:
    """Write ``<dir_path>/.kafka_cleanshutdown`` (``{"version":0,"brokerEpoch":N}``) durably.

    Call it last on a clean close, after every segment and checkpoint is flushed: its presence
    tells the next open to skip recovery. Returns the marker's path.
    """
    path = os.path.join(dir_path, filenames.CLEAN_SHUTDOWN_MARKER)
    content = json.dumps({"version": CLEAN_SHUTDOWN_VERSION, "brokerEpoch": int(broker_epoch)},
                         separators=(",", ":"))
    atomic_write_bytes(path, content.encode("utf-8"))
    return path


def has_clean_shutdown_marker(dir_path: str | os.PathLike) -> bool:
    """Whether the marker exists; only its presence matters for recovery (as in Kafka)."""
    return os.path.exists(os.path.join(dir_path, filenames.CLEAN_SHUTDOWN_MARKER))


def read_clean_shutdown_broker_epoch(dir_path: str | os.PathLike) -> int:
    """The marker's ``brokerEpoch``, or -1 if the marker is missing or unreadable (Kafka's
    ``CleanShutdownFileHandler.read`` logs and returns -1 too)."""
    path = os.path.join(dir_path, filenames.CLEAN_SHUTDOWN_MARKER)
    try:
        text = _read_text(path)
        epoch = json.loads(text)["brokerEpoch"] if text is not None else -1
    except (CorruptCheckpointError, ValueError, KeyError, TypeError):
        return -1
    # A long in Kafka: anything else (a bool, a float, past int64) reads as unreadable, -1.
    if isinstance(epoch, int) and not isinstance(epoch, bool) and -(2**63) <= epoch < 2**63:
        return epoch
    return -1


def remove_clean_shutdown_marker(dir_path: str | os.PathLike) -> bool:
    """Delete the marker (if present) and fsync the directory; return whether it existed.

    Call it when a log directory is opened for writing, before the first append: the removal
    must be durable, or a crash could bring the marker back and let the next open skip
    recovery of data written after it.
    """
    path = os.path.join(dir_path, filenames.CLEAN_SHUTDOWN_MARKER)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    fsync_dir(dir_path)
    return True
