"""``seglog dump PATH ...``: what is inside a data directory's files, as Kafka's
``kafka-dump-log`` (``kafka.tools.DumpLogSegments``) prints it, and ``--verify``.

For the files Kafka's tool reads (``.log``, ``.index``, ``.timeindex``, ``.txnindex``,
producer ``.snapshot``) the text output is Kafka 4.4's, line for line: ``Dumping FILE``, a
batch line per batch (``baseOffset: ... isvalid: true``), with ``--deep-iteration`` a
``| offset: ...`` line per record (``--print-data-log`` adds ``key:`` and ``payload:``,
decoded as UTF-8 as Kafka's StringDecoder does), control records' ``endTxnMarker:``; its
findings after the files on stderr (``Non-consecutive offsets in ...``, ``Mismatches in :...``,
time-index complaints). The files Kafka's tool ignores are dumped too, in the same
``name: value`` style: ``leader-epoch-checkpoint`` (``epoch: E startOffset: O``), the offset
checkpoints of a log dir (``topic: T partition: P offset: O``), ``meta.properties`` and
``partition.metadata``. A directory stands for every file under it.

Kafka's other options work as there: ``--skip-record-metadata``, ``--index-sanity-check``,
``--verify-index-only``, ``--max-bytes``, ``--transaction-log-decoder`` and
``--offsets-decoder`` and ``--share-group-state-decoder`` (records of ``__transaction_state``
/ ``__consumer_offsets`` / ``__share_group_state`` as the JSON Kafka's converters write; the
coordinator records through :mod:`seglog.commands.coordinator_json`, every record type Kafka
4.4 knows). KRaft's control records (leader changes,
voters, snapshot headers) and ``.checkpoint`` snapshots are printed as Kafka prints them.

``--output json`` prints one JSON list, an object per file (``file``, ``kind`` and the
file's entries). ``--verify`` checks instead of printing (:mod:`seglog.commands.verify`).
The files are read directly (no Store is opened), so a data directory a broker is serving
can be dumped; nothing is written.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys
import uuid
from typing import Any, Callable, Iterator

from .. import filenames
from .. import format as fmt
from .._backend import default_backend
from ..errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    InvalidRecordError,
    SeglogError,
)
from ..storage.checkpoints import (
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    parse_java_properties,
    uuid_to_kafka_str,
)
from ..storage.producer_state import increment_sequence, read_snapshot
from .log_files import (
    STATE_SUFFIXES,
    base_offset_of,
    file_kind,
    index_entries,
    read_batches,
    txn_index_entries,
)
from .target import EXIT_ERROR, EXIT_OK

#: Kafka's ControlRecordType ids -> names (``controlType: NAME(id)`` for the ones without
#: a decoder here).
CONTROL_TYPE_NAMES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                      4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}




def expand_paths(paths: list[str]) -> list[str]:
    """Every path, with a directory replaced by the files under it that this tool reads
    (sorted by directory, then name; a log dir's own files before its partition
    directories')."""
    out: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            out.append(path)
            continue
        for root, dirs, files in os.walk(path):
            dirs.sort()
            # Only the files this tool reads: a directory's lock, markers and the
            # .deleted/.cleaned/.swap leftovers are not worth a line each.
            out.extend(os.path.join(root, name) for name in sorted(files)
                       if file_kind(name) is not None and not name.endswith(STATE_SUFFIXES))
    return out


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None or value < 0 else f"OptionalLong[{value}]"


def _text(data: bytes | None) -> str | None:
    # Kafka's StringDecoder: new String(bytes, UTF_8), malformed input replaced.
    return None if data is None else data.decode("utf-8", errors="replace")


def timestamp_type_name(batch: Any) -> str:
    """``CreateTime`` or ``LogAppendTime`` (Kafka's TimestampType names)."""
    return fmt.TIMESTAMP_TYPE_NAMES.get(batch.timestamp_type, "NoTimestampType")


def batch_fields(batch: Any, position: int) -> dict[str, Any]:
    """Kafka's batch line as ``{name: value}``, in Kafka's order (the timestamp under its
    type's name)."""
    return {
        "baseOffset": batch.base_offset, "lastOffset": batch.last_offset,
        "count": batch.record_count, "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence, "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": bool(batch.is_transactional), "isControl": bool(batch.is_control),
        "deleteHorizonMs": batch.delete_horizon_ms if batch.has_delete_horizon else None,
        "position": position, timestamp_type_name(batch): batch.max_timestamp_ms,
        "size": batch.size_bytes, "magic": batch.magic, "compresscodec": batch.compression,
        "crc": batch.crc, "isvalid": bool(batch.is_valid()),
    }


def _java(value: Any, name: str) -> str:
    if name == "deleteHorizonMs":
        return _optional_long(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _field_text(name: str, value: Any) -> str:
    if name == "headerKeys":
        return f"{name}: [{','.join(value)}]"
    if name in _KRAFT_CONTROL_LABELS.values():
        return f"{name} {value}"
    return f"{name}: {value}"


def batch_line(fields: dict[str, Any]) -> str:
    """The batch line Kafka prints for ``batch_fields``."""
    return " ".join(f"{name}: {_java(value, name)}" for name, value in fields.items())


class _Reader:
    """Kafka's flexible-version message encoding, just what the KRaft control records use."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def take(self, count: int) -> bytes:
        if self.position + count > len(self.data):
            raise ValueError("control record value too short")
        chunk = self.data[self.position:self.position + count]
        self.position += count
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def uint16(self) -> int:
        return int(struct.unpack(">H", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def string(self) -> str:
        return self.take(self.uvarint() - 1).decode("utf-8")

    def uuid(self) -> str:
        return uuid_to_kafka_str(uuid.UUID(bytes=self.take(16)))

    def array(self, item: Callable[[], dict[str, Any]]) -> list[dict[str, Any]]:
        return [item() for _ in range(self.uvarint() - 1)]

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def _kraft_control_json(type_id: int, value: bytes) -> dict[str, Any]:
    # ControlRecordUtils peeks the version at the front of the value and reads the message
    # (flexible) from there: its first field is that Version; the JSON converters write
    # the fields of that version.
    reader = _Reader(value)
    version = reader.int16()
    out: dict[str, Any] = {"version": version}
    if type_id == 2:  # LeaderChangeMessage
        def voter() -> dict[str, Any]:
            item: dict[str, Any] = {"voterId": reader.int32()}
            if version >= 1:
                item["voterDirectoryId"] = reader.uuid()
            reader.tagged_fields()
            return item
        out["leaderId"] = reader.int32()
        out["voters"] = reader.array(voter)
        out["grantingVoters"] = reader.array(voter)
    elif type_id == 3:  # SnapshotHeaderRecord
        out["lastContainedLogTimestamp"] = reader.int64()
    elif type_id == 5:  # KRaftVersionRecord
        out["kRaftVersion"] = reader.int16()
    elif type_id == 6:  # VotersRecord
        def endpoint() -> dict[str, Any]:
            item = {"name": reader.string(), "host": reader.string(), "port": reader.uint16()}
            reader.tagged_fields()
            return item

        def voters_voter() -> dict[str, Any]:
            item: dict[str, Any] = {"voterId": reader.int32(),
                                    "voterDirectoryId": reader.uuid(),
                                    "endpoints": reader.array(endpoint)}
            feature = {"minSupportedVersion": reader.int16(),
                       "maxSupportedVersion": reader.int16()}
            reader.tagged_fields()
            item["kRaftVersionFeature"] = feature
            reader.tagged_fields()
            return item
        out["voters"] = reader.array(voters_voter)
    return out


#: KRaft control records: the label Kafka's tool prints before each one's JSON (the leader
#: change with a colon, the others without).
_KRAFT_CONTROL_LABELS = {2: "LeaderChange:", 3: "SnapshotHeader", 4: "SnapshotFooter",
                         5: "KRaftVersion", 6: "KRaftVoters"}


def control_fields(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """What Kafka prints of a control record: ``endTxnMarker`` and ``coordinatorEpoch`` for
    a commit or abort marker; for KRaft's (leader change, snapshot header and footer, kraft
    version, voters) its label and the record as JSON; else ``controlType`` (``NAME(id)``)."""
    if key is None or len(key) < fmt.CONTROL_KEY.size:
        return {"controlType": "UNKNOWN(-1)"}
    _version, type_id = fmt.CONTROL_KEY.unpack_from(key)
    name = CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")
    if type_id in (fmt.CONTROL_TYPE_ABORT, fmt.CONTROL_TYPE_COMMIT) and value is not None \
            and len(value) >= fmt.END_TXN_MARKER_VALUE.size:
        _v, coordinator_epoch = fmt.END_TXN_MARKER_VALUE.unpack_from(value)
        return {"endTxnMarker": name, "coordinatorEpoch": coordinator_epoch}
    if type_id in _KRAFT_CONTROL_LABELS and value is not None:
        try:
            return {_KRAFT_CONTROL_LABELS[type_id]: _json(_kraft_control_json(type_id,
                                                                              bytes(value)))}
        except (ValueError, UnicodeDecodeError):
            pass
    return {"controlType": f"{name}({type_id})"}


#: Kafka's ``--max-bytes`` default (Integer.MAX_VALUE: the whole file).
INT32_MAX = fmt.INT32_MAX


class DumpOptions:
    """What to print of a ``.log``: records (``deep``), their keys and values
    (``print_data``), or only keys and values (``skip_record_metadata``); ``decoder``
    (offset, key, value) -> (key text, payload text) replaces the UTF-8 text (Kafka's
    ``--transaction-log-decoder``), a None text is left out."""

    def __init__(self, *, deep: bool = False, print_data: bool = False,
                 skip_record_metadata: bool = False,
                 decoder: Callable[[int, bytes | None, bytes | None],
                                   tuple[str | None, str | None]] | None = None) -> None:
        self.print_data = print_data or decoder is not None
        self.deep = deep or self.print_data
        self.skip_record_metadata = skip_record_metadata
        self.decoder = decoder
        #: ``--index-sanity-check``: only Kafka's sanity check of each index.
        self.index_sanity_only = False
        #: ``--verify-index-only``: check the indexes without printing their entries.
        self.verify_index_only = False
        #: ``--max-bytes``: read at most this many bytes of each ``.log``.
        self.max_bytes = INT32_MAX


#: Where a ``__transaction_state`` value's partitions count starts: after the version (2),
#: producer id (8), epoch (2), timeout (4) and status (1).
_TXN_PARTITIONS_POSITION = 17


def _json(node: Any) -> str:
    # Jackson's ObjectNode.toString: compact, non-ASCII as is.
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False)


def transaction_log_record(offset: int, key: bytes | None,
                           value: bytes | None) -> tuple[str | None, str | None]:
    """A ``__transaction_state`` record as Kafka's ``--transaction-log-decoder`` prints it:
    ``(key, payload)`` texts, JSON as Kafka's generated converters write it (tagged fields
    only when not at their default, the status by name, ``<DELETE>`` for a tombstone)."""
    from ..coordinator import txn_schema

    if key is None:
        raise ValueError(f"Failed to decode message at offset {offset} using the specified "
                         f"decoder (message had a missing key)")
    try:
        version = txn_schema.key_version(key)
        if version != txn_schema.KEY_VERSION:
            return f"Unknown record type {version} at offset {offset}, skipping.", None
        key_text = _json({"type": str(txn_schema.KEY_VERSION),
                          "data": {"transactionalId": txn_schema.decode_key(key)}})
        decoded = txn_schema.decode_value(value)
    except SeglogError as exc:
        return f"Error at offset {offset}, skipping. {exc}", None
    if decoded is None or value is None:
        return key_text, "<DELETE>"
    flexible = decoded.version >= txn_schema.FLEXIBLE_VALUE_VERSION
    null_partitions = (value[_TXN_PARTITIONS_POSITION] == 0 if flexible else
                       value[_TXN_PARTITIONS_POSITION:_TXN_PARTITIONS_POSITION + 4]
                       == b"\xff\xff\xff\xff")
    topics: list[dict[str, Any]] = []
    for topic, partition in decoded.partitions:
        if not topics or topics[-1]["topic"] != topic:
            topics.append({"topic": topic, "partitionIds": []})
        topics[-1]["partitionIds"].append(partition)
    data: dict[str, Any] = {"producerId": decoded.producer_id}
    if flexible:
        if decoded.previous_producer_id != -1:
            data["previousProducerId"] = decoded.previous_producer_id
        if decoded.next_producer_id != -1:
            data["nextProducerId"] = decoded.next_producer_id
    data["producerEpoch"] = decoded.producer_epoch
    if flexible and decoded.next_producer_epoch != -1:
        data["nextProducerEpoch"] = decoded.next_producer_epoch
    data["transactionTimeoutMs"] = decoded.timeout_ms
    data["transactionStatus"] = txn_schema.STATE_NAMES.get(decoded.status,
                                                           str(decoded.status))
    data["transactionPartitions"] = None if null_partitions else topics
    data["transactionLastUpdateTimestampMs"] = decoded.last_update_timestamp_ms
    data["transactionStartTimestampMs"] = decoded.start_timestamp_ms
    if flexible and decoded.client_transaction_version != 0:
        data["clientTransactionVersion"] = decoded.client_transaction_version
    return key_text, _json({"version": str(decoded.version), "data": data})


class _PlainReader:
    """The non-flexible encoding of the consumer protocol's embedded messages."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def unpack(self, code: str) -> int:
        size = struct.calcsize(">" + code)
        if self.position + size > len(self.data):
            raise ValueError("truncated")
        (value,) = struct.unpack_from(">" + code, self.data, self.position)
        self.position += size
        return int(value)

    def string(self) -> str | None:
        length = self.unpack("h")
        if length < 0:
            return None
        if self.position + length > len(self.data):
            raise ValueError("truncated")
        text = self.data[self.position:self.position + length].decode("utf-8")
        self.position += length
        return text

    def bytes_b64(self) -> str | None:
        length = self.unpack("i")
        if length < 0:
            return None
        if self.position + length > len(self.data):
            raise ValueError("truncated")
        chunk = self.data[self.position:self.position + length]
        self.position += length
        return base64.b64encode(chunk).decode("ascii")

    def array(self, item: Callable[[], Any]) -> list[Any]:
        count = self.unpack("i")
        if count < 0 or count > len(self.data):
            raise ValueError("bad array length")
        return [item() for _ in range(count)]

    def topic_partitions(self) -> list[dict[str, Any]]:
        return self.array(lambda: {"topic": self.string(),
                                   "partitions": self.array(lambda: self.unpack("i"))})


def _consumer_protocol_json(data: bytes, field: str) -> dict[str, Any] | None:
    # Kafka's OffsetsMessageParser.replaceField: a member's subscription or assignment of a
    # "consumer" group as ConsumerProtocolSubscription/Assignment JSON (versions 0-3), or
    # left as base64 when it does not parse.
    try:
        reader = _PlainReader(data)
        version = reader.unpack("h")
        if not 0 <= version <= 3:
            return None
        if field == "assignment":
            return {"assignedPartitions": reader.topic_partitions(),
                    "userData": reader.bytes_b64()}
        out: dict[str, Any] = {"topics": reader.array(reader.string),
                               "userData": reader.bytes_b64()}
        if version >= 1:
            out["ownedPartitions"] = reader.topic_partitions()
        if version >= 2:
            out["generationId"] = reader.unpack("i")
        if version >= 3:
            out["rackId"] = reader.string()
        return out
    except (ValueError, UnicodeDecodeError):
        return None


def _coordinator_record(coordinator: bool, offset: int, key: bytes | None,
                        value: bytes | None) -> tuple[str | None, str | None]:
    # Kafka's CoordinatorRecordMessageParser: {"type","data"} of the key, {"version","data"}
    # of the value or <DELETE>; an unknown type or bytes that do not parse become one line.
    from .coordinator_json import RecordDecodeError, UnknownRecordType, decode_record

    if key is None:
        raise ValueError(f"Failed to decode message at offset {offset} using the specified "
                         f"decoder (message had a missing key)")
    try:
        record_type, key_node, version, value_node = decode_record(coordinator, bytes(key),
                                                                   value)
    except UnknownRecordType as exc:
        return f"Unknown record type {exc.record_type} at offset {offset}, skipping.", None
    except RecordDecodeError as exc:
        return f"Error at offset {offset}, skipping. {exc}", None
    key_text = _json({"type": str(record_type), "data": key_node})
    if value_node is None:
        return key_text, "<DELETE>"
    if (coordinator is False and record_type == _GROUP_METADATA_TYPE
            and value_node.get("protocolType") == "consumer"):
        # Kafka's OffsetsMessageParser.prepareGroupMetadataValue: a "consumer" group's
        # members' subscriptions and assignments as JSON when they parse.
        for member in value_node.get("members") or ():
            for name in ("subscription", "assignment"):
                if isinstance(member.get(name), str):
                    decoded = _consumer_protocol_json(base64.b64decode(member[name]), name)
                    if decoded is not None:
                        member[name] = decoded
    return key_text, _json({"version": str(version), "data": value_node})


#: The record type of a classic group's metadata (Kafka's CoordinatorRecordType.GROUP_METADATA).
_GROUP_METADATA_TYPE = 2


def offsets_record(offset: int, key: bytes | None,
                   value: bytes | None) -> tuple[str | None, str | None]:
    """A ``__consumer_offsets`` record as Kafka's ``--offsets-decoder`` prints it: every
    record type of Kafka 4.4's group coordinator (offset commits, classic groups with the
    members' subscriptions and assignments of "consumer" groups decoded, consumer, share and
    streams groups) as its generated JSON converter writes it
    (:mod:`seglog.commands.coordinator_json`)."""
    from .coordinator_json import GROUP_COORDINATOR

    return _coordinator_record(GROUP_COORDINATOR, offset, key, value)


def share_group_state_record(offset: int, key: bytes | None,
                             value: bytes | None) -> tuple[str | None, str | None]:
    """A ``__share_group_state`` record as Kafka's ``--share-group-state-decoder`` prints it:
    ShareSnapshot (type 0) and ShareUpdate (type 1) keys and values as JSON."""
    from .coordinator_json import SHARE_COORDINATOR

    return _coordinator_record(SHARE_COORDINATOR, offset, key, value)


# --- per kind: a dict for JSON and the lines Kafka prints --------------------------------------

class FileDump:
    """One dumped file: ``data`` (the JSON object), ``lines`` (stdout text, Kafka's) and
    ``findings`` (Kafka's stderr summary lines for it), ``error`` (why it stopped, or None)."""

    def __init__(self, path: str, kind: str) -> None:
        self.path = path
        self.data: dict[str, Any] = {"file": path, "kind": kind}
        self.lines: list[str] = []
        self.findings: list[str] = []
        self.error: str | None = None


def dump_log(path: str, options: DumpOptions,
             emit: Callable[[str], None] | None = None) -> FileDump:
    """A ``.log`` as Kafka's tool dumps it. ``emit`` (when given) gets each stdout line at
    once (a big segment is printed as it is read, not kept)."""
    out = FileDump(path, "log")
    say = emit or out.lines.append
    name = os.path.basename(path)
    base = -1
    if name == "bootstrap.checkpoint":
        say("KRaft bootstrap snapshot")
    elif name.endswith(".checkpoint"):
        # a KRaft snapshot, <end offset>-<epoch>.checkpoint
        end_offset, epoch = name[:-len(".checkpoint")].split("-")
        say(f"Snapshot end offset: {int(end_offset)}, epoch: {int(epoch)}")
    else:
        base = base_offset_of(path)
        say(f"Log starting offset: {base}")
    data = _read_file(path)[:options.max_bytes]
    batches, valid_bytes, error = read_batches(data)
    keep = emit is None
    json_batches: list[dict[str, Any]] = []
    last_offset = -1
    gaps: list[tuple[int, int]] = []
    for batch in batches:
        fields = batch_fields(batch, batch.position)
        say(batch_line(fields))
        records_json: list[dict[str, Any]] = []
        if options.deep:
            try:
                records = batch.records(check_crcs=False)
            except (CorruptRecordError, InvalidRecordError, SeglogError) as exc:
                out.error = (f"batch at position {batch.position} (offset "
                             f"{batch.base_offset}): cannot decode its records: {exc}")
                break
            ts_name = timestamp_type_name(batch)
            for record in records:
                if record.offset != last_offset + 1:
                    gaps.append((last_offset, record.offset))
                last_offset = record.offset
                sequence = (increment_sequence(batch.base_sequence, record.offset - batch.base_offset)
                            if batch.base_sequence >= 0 else -1)
                rec: dict[str, Any] = {
                    "offset": record.offset, ts_name: record.timestamp_ms,
                    "keySize": -1 if record.key is None else len(record.key),
                    "valueSize": -1 if record.value is None else len(record.value),
                    "sequence": sequence,
                    "headerKeys": [k for k, _v in record.headers],
                }
                if batch.is_control:
                    rec.update(control_fields(record.key, record.value))
                line = ""
                if not options.skip_record_metadata:
                    line = "| " + " ".join(_field_text(k, v) for k, v in rec.items())
                if options.print_data and not batch.is_control:
                    prefix = "| " if options.skip_record_metadata else " "
                    if options.decoder is not None:
                        key_text, value_text = options.decoder(record.offset, record.key,
                                                               record.value)
                    else:
                        key_text, value_text = _text(record.key), _text(record.value)
                    if key_text is not None:
                        rec["key"] = key_text
                        line += f"{prefix}key: {key_text}"
                        prefix = " "
                    if value_text is not None:
                        rec["payload"] = value_text
                        line += f"{prefix}payload: {value_text}"
                say(line)
                if keep:
                    records_json.append(rec)
        if keep:
            if options.deep:
                fields["records"] = records_json
            json_batches.append(fields)
    trailing = len(data) - valid_bytes
    if error is not None:
        out.error = f"{error.reason or error} at position {error.position}"
    elif trailing > 0 and out.error is None and options.max_bytes == INT32_MAX:
        say(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}")
    out.data.update(base_offset=base, batches=json_batches, invalid_trailing_bytes=trailing)
    if options.deep:
        # Kafka keeps them in a TreeMap keyed by the offset before the gap.
        gaps = sorted(dict(gaps).items())
        out.data["non_consecutive_offsets"] = [list(g) for g in gaps]
        if gaps:
            out.findings.append(f"Non-consecutive offsets in {os.path.abspath(path)}")
            out.findings += [f"  {a} is followed by {b}" for a, b in gaps]
    return out


def _batch_at(batches: list[Any], position: int) -> Any | None:
    for batch in batches:
        if batch.position == position:
            return batch
    return None


def _segment_log(path: str) -> tuple[bytes | None, list[Any]]:
    log_path = os.path.join(os.path.dirname(path),
                            os.path.basename(path).split(".")[0] + filenames.LOG_SUFFIX)
    try:
        data = _read_file(log_path)
    except OSError:
        return None, []
    return data, read_batches(data)[0]


def _sanity_failure(path: str, kind: str, length: int, entry_bytes: int) -> str | None:
    # Kafka's OffsetIndex/TimeIndex.sanityCheck, the size rule (the offset rules follow).
    if length % entry_bytes:
        return (f"{kind} file {os.path.abspath(path)} is corrupt, found {length} bytes which "
                f"is neither positive nor a multiple of {entry_bytes}.")
    return None


def dump_index(path: str, options: DumpOptions | None = None) -> FileDump:
    """An ``.index`` as Kafka's tool dumps it (``offset: O position: P``; mismatches against
    the ``.log`` beside it as its stderr summary; ``--index-sanity-check`` and
    ``--verify-index-only`` as there)."""
    options = options or DumpOptions()
    out = FileDump(path, "index")
    base = base_offset_of(path)
    data = _read_file(path)
    raw = [(base + rel, pos) for rel, pos in index_entries(data, fmt.OFFSET_INDEX_ENTRY)]
    whole = len(data) // fmt.OFFSET_INDEX_ENTRY_BYTES
    if options.index_sanity_only:
        if whole == 0:
            out.lines.append(f"{path} is empty.")
            return out
        last = base + fmt.OFFSET_INDEX_ENTRY.unpack_from(
            data, (whole - 1) * fmt.OFFSET_INDEX_ENTRY_BYTES)[0]
        out.error = (f"Corrupt index found, index file ({os.path.abspath(path)}) has non-zero "
                     f"size but the last offset is {last} which is less than the base offset "
                     f"{base}.") if last < base else _sanity_failure(
            path, "Index", len(data), fmt.OFFSET_INDEX_ENTRY_BYTES)
        if out.error is None:
            out.lines.append(f"{path} passed sanity check.")
        out.data["sanity_check"] = out.error or "passed"
        return out
    entries: list[tuple[int, int]] = []
    for i, (offset, position) in enumerate(raw):
        if offset == base and i > 0:
            break
        entries.append((offset, position))
    log, batches = _segment_log(path)
    mismatches: dict[int, int] = {}
    if not entries:
        out.lines.append(f"{path} is empty.")
    for offset, position in entries:
        if log is not None:
            batch = _batch_at(batches, position)
            if batch is None:
                out.error = f"index entry {offset} names position {position}: no batch there"
                break
            if batch.last_offset != offset:
                mismatches[offset] = batch.last_offset
        if not options.verify_index_only:
            out.lines.append(f"offset: {offset} position: {position}")
    out.data.update(base_offset=base,
                    entries=[{"offset": o, "position": p} for o, p in entries],
                    mismatches=[{"index_offset": o, "log_offset": lo}
                                for o, lo in sorted(mismatches.items(), reverse=True)])
    if mismatches:
        out.findings.append(f"Mismatches in :{os.path.abspath(path)}")
        out.findings += [f"  Index offset: {o}, log offset: {lo}"
                         for o, lo in sorted(mismatches.items(), reverse=True)]
    return out


def dump_time_index(path: str, options: DumpOptions | None = None) -> FileDump:
    """A ``.timeindex`` as Kafka's tool dumps it (``timestamp: T offset: O``, checked against
    the max record timestamp of the batch ending at O; ``--index-sanity-check`` and
    ``--verify-index-only`` as there)."""
    options = options or DumpOptions()
    out = FileDump(path, "timeindex")
    base = base_offset_of(path)
    data = _read_file(path)
    entries = [(ts, base + rel) for ts, rel in index_entries(data, fmt.TIME_INDEX_ENTRY)]
    if options.index_sanity_only:
        whole = len(data) // fmt.TIME_INDEX_ENTRY_BYTES
        absolute = os.path.abspath(path)
        if whole:
            first_ts = fmt.TIME_INDEX_ENTRY.unpack_from(data, 0)[0]
            last_ts, last_rel = fmt.TIME_INDEX_ENTRY.unpack_from(
                data, (whole - 1) * fmt.TIME_INDEX_ENTRY_BYTES)
            if last_ts < first_ts:
                out.error = (f"Corrupt time index found, time index file ({absolute}) has "
                             f"non-zero size but the last timestamp is {last_ts} which is less "
                             f"than the first timestamp {first_ts}")
            elif base + last_rel < base:
                out.error = (f"Corrupt time index found, time index file ({absolute}) has "
                             f"non-zero size but the last offset is {base + last_rel} which is "
                             f"less than the first offset {base}")
        out.error = out.error or _sanity_failure(path, "Time index", len(data),
                                                 fmt.TIME_INDEX_ENTRY_BYTES)
        if out.error is None:
            out.lines.append(f"{path} passed sanity check.")
        out.data["sanity_check"] = out.error or "passed"
        return out
    _log, batches = _segment_log(path)
    mismatch, out_of_order, not_found = [], [], []
    shown = []
    previous = -1
    for i, (timestamp, offset) in enumerate(entries):
        if offset == base and i > 0:
            break
        holder = next((b for b in batches if b.last_offset >= offset), None)
        if holder is None:
            not_found.append((offset, -1))
        elif holder.last_offset != offset:
            not_found.append((offset, holder.last_offset))
        else:
            try:
                stamps = [r.timestamp_ms for r in holder.records(check_crcs=False)]
            except SeglogError:
                stamps = []
            max_ts = max(stamps, default=-1)
            if max_ts != timestamp:
                mismatch.append((timestamp, max_ts))
            if previous >= timestamp:
                out_of_order.append((timestamp, previous))
        if not options.verify_index_only:
            out.lines.append(f"timestamp: {timestamp} offset: {offset}")
        shown.append({"timestamp": timestamp, "offset": offset})
        previous = timestamp
    absolute = os.path.abspath(path)
    out.data.update(base_offset=base, entries=shown,
                    timestamp_mismatches=[list(m) for m in mismatch],
                    out_of_order=[list(m) for m in out_of_order],
                    offsets_not_found=[list(m) for m in not_found])
    if mismatch:
        out.findings.append(f"Found timestamp mismatch in :{absolute}")
        out.findings += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in mismatch]
    if out_of_order:
        out.findings.append(f"Found out of order timestamp in :{absolute}")
        out.findings += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}"
                         for a, b in out_of_order]
    if not_found:
        out.findings.append(f"The following indexed offsets are not found in :{absolute}")
        out.findings += [f"Indexed offset: {a}, found log offset: {b}" for a, b in not_found]
    return out


def dump_txn_index(path: str) -> FileDump:
    """A ``.txnindex`` as Kafka's tool dumps it."""
    out = FileDump(path, "txnindex")
    try:
        entries = txn_index_entries(_read_file(path))
    except CorruptIndexError as exc:
        out.error = str(exc)
        entries = []
    for txn in entries:
        out.lines.append(f"version: 0 producerId: {txn.producer_id} firstOffset: "
                         f"{txn.first_offset} lastOffset: {txn.last_offset} lastStableOffset: "
                         f"{txn.last_stable_offset}")
    out.data["entries"] = [{"version": 0, "producerId": t.producer_id,
                            "firstOffset": t.first_offset, "lastOffset": t.last_offset,
                            "lastStableOffset": t.last_stable_offset} for t in entries]
    return out


def dump_snapshot(path: str) -> FileDump:
    """A producer-state ``.snapshot`` as Kafka's tool dumps it (a corrupt one: its message on
    stderr, as Kafka)."""
    out = FileDump(path, "snapshot")
    producers: list[dict[str, Any]] = []
    try:
        entries = read_snapshot(path, crc32c=default_backend().crc32c)
    except CorruptSnapshotError as exc:
        out.findings.append(str(exc))
        out.data["error"] = str(exc)
        entries = []
    for entry in entries:
        fields: dict[str, Any] = {
            "producerId": entry.producer_id, "producerEpoch": entry.producer_epoch,
            "coordinatorEpoch": entry.coordinator_epoch,
            "currentTxnFirstOffset": entry.current_txn_first_offset,
            "lastTimestamp": entry.last_timestamp_ms,
        }
        if entry.batch_metadata:
            meta = entry.batch_metadata[0]
            fields.update(firstSequence=meta.first_seq, lastSequence=meta.last_seq,
                          lastOffset=meta.last_offset, offsetDelta=meta.offset_delta,
                          timestamp=meta.timestamp_ms)
        producers.append(fields)
        out.lines.append(" ".join(
            f"{k}: {_optional_long(v) if k == 'currentTxnFirstOffset' else v}"
            for k, v in fields.items()))
    out.data["producers"] = producers
    return out


def dump_leader_epochs(path: str) -> FileDump:
    """A ``leader-epoch-checkpoint``: ``epoch: E startOffset: O`` per entry."""
    out = FileDump(path, "leader-epoch-checkpoint")
    entries = LeaderEpochCheckpointFile(path).read()
    out.lines += [f"epoch: {e.epoch} startOffset: {e.start_offset}" for e in entries]
    out.data["entries"] = [{"epoch": e.epoch, "startOffset": e.start_offset} for e in entries]
    return out


def dump_offset_checkpoint(path: str) -> FileDump:
    """An offset checkpoint of a log dir: ``topic: T partition: P offset: O`` per entry."""
    out = FileDump(path, "offset-checkpoint")
    offsets = OffsetCheckpointFile(path).read()
    out.lines += [f"topic: {t} partition: {p} offset: {o}" for (t, p), o in offsets.items()]
    out.data["entries"] = [{"topic": t, "partition": p, "offset": o}
                           for (t, p), o in offsets.items()]
    return out


def dump_meta_properties(path: str) -> FileDump:
    """``meta.properties``: ``key: value`` per property, in file order."""
    out = FileDump(path, "meta.properties")
    props = parse_java_properties(_read_file(path).decode("utf-8"))
    out.lines += [f"{k}: {v}" for k, v in props.items()]
    out.data["properties"] = dict(props)
    return out


def dump_partition_metadata(path: str) -> FileDump:
    """``partition.metadata``: ``version: 0 topicId: ID``."""
    out = FileDump(path, "partition.metadata")
    topic_id = PartitionMetadataFile(path).read()
    text = None if topic_id is None else uuid_to_kafka_str(topic_id)
    out.lines.append(f"version: 0 topicId: {text}")
    out.data.update(version=0, topicId=text)
    return out


_DUMPERS: dict[str, Callable[[str], FileDump]] = {
    "txnindex": dump_txn_index,
    "snapshot": dump_snapshot, "leader-epoch-checkpoint": dump_leader_epochs,
    "offset-checkpoint": dump_offset_checkpoint, "meta.properties": dump_meta_properties,
    "partition.metadata": dump_partition_metadata,
}


def dump_file(path: str, options: DumpOptions,
              emit: Callable[[str], None] | None = None) -> FileDump | None:
    """Dump one file (None: a file this tool does not know). OSError,
    CorruptCheckpointError, ValueError propagate."""
    kind = file_kind(path)
    if kind is None:
        return None
    if kind == "log":
        return dump_log(path, options, emit)
    if kind == "index":
        return dump_index(path, options)
    if kind == "timeindex":
        return dump_time_index(path, options)
    return _DUMPERS[kind](path)


# --- the command ---------------------------------------------------------------------------

def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Register ``seglog dump``."""
    parser = sub.add_parser(
        "dump", help="print a data directory's files as kafka-dump-log does; --verify checks "
                     "them",
        description=(
            "Print what is inside a partition's files, field for field as Kafka's "
            "kafka-dump-log prints them: .log (batches; records with --deep-iteration; keys "
            "and values with --print-data-log), .index, .timeindex, .txnindex, producer "
            ".snapshot files, and the files Kafka's tool does not read: "
            "leader-epoch-checkpoint, the log dir's offset checkpoints, meta.properties, "
            "partition.metadata. A directory stands for every file under it. The files are "
            "only read: a directory a broker serves can be dumped. With --verify, check a "
            "partition directory or whole data directories instead (every CRC, offset, index "
            "and time-index entry, the leader-epoch checkpoint) and exit 3 naming each "
            "problem as 'path: what'."),
        epilog=("examples:\n"
                "  seglog dump data/clicks-0/00000000000000000000.log --deep-iteration "
                "--print-data-log\n"
                "  seglog dump data/clicks-0/00000000000000000000.index\n"
                "  seglog dump --verify data            # exit 0: clean, 3: problems listed"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories (with --verify: partition or data "
                             "directories, JBOD log dirs each named)")
    parser.add_argument("--files", metavar="FILE1,FILE2,...",
                        help="kafka-dump-log's way of naming the files (comma separated)")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="print every record of each batch, not only the batches")
    parser.add_argument("--print-data-log", action="store_true",
                        help="print each record's key and value (UTF-8); implies "
                             "--deep-iteration")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="print records' keys and values without their metadata "
                             "(control records print an empty line, as Kafka's tool)")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="only run Kafka's sanity check of each .index and .timeindex "
                             "(the check a broker runs at start)")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="check each .index and .timeindex against its .log without "
                             "printing the entries (the findings go to stderr)")
    parser.add_argument("--max-bytes", type=int, default=INT32_MAX, metavar="N",
                        help="read at most N bytes of each .log")
    parser.add_argument("--max-message-size", type=int, default=5242880, metavar="N",
                        help="accepted for kafka-dump-log's command lines (batches are read "
                             "whole whatever their size)")
    parser.add_argument("--offsets-decoder", action="store_true",
                        help="decode records as __consumer_offsets' (JSON, as Kafka's tool: "
                             "offset commits, classic, consumer, share and streams groups); "
                             "implies --print-data-log")
    parser.add_argument("--transaction-log-decoder", action="store_true",
                        help="decode records as __transaction_state's (JSON, as Kafka's "
                             "tool); implies --print-data-log")
    parser.add_argument("--share-group-state-decoder", action="store_true",
                        help="decode records as __share_group_state's (share-partition "
                             "snapshots and updates as JSON, as Kafka's tool); implies "
                             "--print-data-log")
    parser.add_argument("--verify", action="store_true",
                        help="check the files instead of printing them; exit 3 if any "
                             "problem is found")
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text",
                        help="text (Kafka's) for people, json for scripts")
    parser.set_defaults(run=main)
    return parser


def _paths(args: argparse.Namespace) -> list[str]:
    paths = list(args.paths)
    if args.files:
        paths += [p for p in args.files.split(",") if p]
    return paths


def _decoder(args: argparse.Namespace) -> Callable[[int, bytes | None, bytes | None],
                                                  tuple[str | None, str | None]] | None:
    # Kafka's DumpLogSegmentsOptions.messageParser: the first decoder option given wins, in
    # this order.
    if args.offsets_decoder:
        return offsets_record
    if args.transaction_log_decoder:
        return transaction_log_record
    if args.share_group_state_decoder:
        return share_group_state_record
    return None


def main(args: argparse.Namespace) -> int:
    """Run ``seglog dump``; the exit code."""
    paths = _paths(args)
    if not paths:
        print("seglog dump: name at least one PATH (or --files)", file=sys.stderr)
        return 2
    if args.verify:
        from .verify import run_verify
        return run_verify(paths, as_json=args.output == "json")
    options = DumpOptions(deep=args.deep_iteration, print_data=args.print_data_log,
                          skip_record_metadata=args.skip_record_metadata,
                          decoder=_decoder(args))
    options.index_sanity_only = args.index_sanity_check
    options.verify_index_only = args.verify_index_only
    options.max_bytes = args.max_bytes
    as_json = args.output == "json"
    code = EXIT_OK
    dumped: list[dict[str, Any]] = []
    findings: list[str] = []
    for path in expand_paths(paths):
        if not as_json:
            print(f"Dumping {path}")
        emit: Callable[[str], None] | None = None if as_json else print
        try:
            result = dump_file(path, options, emit)
        except (OSError, ValueError, CorruptCheckpointError, UnicodeDecodeError,
                SeglogError) as exc:
            print(f"seglog dump: {path}: {exc}", file=sys.stderr)
            code = EXIT_ERROR
            continue
        if result is None:
            print(f"Ignoring unknown file {path}", file=sys.stderr)
            continue
        if not as_json:
            for line in result.lines:
                print(line)
        findings += result.findings
        if result.error is not None:
            result.data["error"] = result.error
            print(f"seglog dump: {path}: {result.error}", file=sys.stderr)
            code = EXIT_ERROR
        dumped.append(result.data)
    if as_json:
        json.dump(dumped, sys.stdout)
        sys.stdout.write("\n")
    else:
        # Kafka prints its findings (index mismatches, offset gaps) after every file.
        for line in _kafka_order(findings):
            print(line, file=sys.stderr)
    sys.stdout.flush()
    return code


_FINDING_HEADS = ("Mismatches in :", "Found timestamp mismatch in :",
                  "Found out of order timestamp in :",
                  "The following indexed offsets are not found in :", "Non-consecutive offsets in ")


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as an unsigned 32-bit int."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_map_order(keys: list[str]) -> list[str]:
    """``keys`` (distinct, in insertion order) in the order a ``java.util.HashMap<String, ?>``
    filled by ``computeIfAbsent`` iterates them (Kafka's tool keeps its findings per file so
    and prints them in this order). computeIfAbsent puts a new key at the head of its bucket
    and grows the table (16 buckets, doubled) before an insertion once it is over 3/4 full;
    a resize splits each bucket keeping its order."""
    table: list[list[tuple[int, str]]] = []
    threshold = 0
    size = 0
    for key in keys:
        if not table or size > threshold:
            capacity = 2 * len(table) if table else 16
            grown: list[list[tuple[int, str]]] = [[] for _ in range(capacity)]
            for bucket in table:
                for spread, old in bucket:
                    grown[spread & (capacity - 1)].append((spread, old))
            table, threshold = grown, capacity * 3 // 4
        h = java_string_hash(key)
        spread = h ^ (h >> 16)
        table[spread & (len(table) - 1)].insert(0, (spread, key))
        size += 1
    return [key for bucket in table for _spread, key in bucket]


def _kafka_order(findings: list[str]) -> Iterator[str]:
    # Kafka prints index mismatches, then the time-index findings, then offset gaps; each kind
    # from its own HashMap keyed by the file's absolute path. A group of lines starts with a
    # head naming the file.
    groups: dict[int, dict[str, list[str]]] = {}
    current: list[str] | None = None
    for line in findings:
        kind = next((i for i, head in enumerate(_FINDING_HEADS) if line.startswith(head)), -1)
        if kind < 0:
            if current is not None and (line.startswith(" ") or line.startswith("Indexed")):
                current.append(line)
            else:
                groups.setdefault(-1, {})[line] = current = []
            continue
        path = line[len(_FINDING_HEADS[kind]):]
        current = groups.setdefault(kind, {}).setdefault(path, [line])
    for kind in sorted(groups):
        by_path = groups[kind]
        for path in (java_hash_map_order(list(by_path)) if kind >= 0 else list(by_path)):
            if kind < 0:
                yield path
            yield from by_path[path]
