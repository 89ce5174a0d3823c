"""A broker's requests to another broker: one TCP connection, Kafka's framing, the three
requests a follower sends (Fetch v12, OffsetForLeaderEpoch v4, ListOffsets v6: Kafka 2.8's
versions at inter-broker protocol 2.8) and bounds-checked decoders of their responses.

Requests are encoded with kio's writers (request header v2: every version used here is
flexible). Responses are decoded here by hand, field by field in the order of Kafka's
``FetchResponse.json``, ``OffsetForLeaderEpochResponse.json`` and ``ListOffsetsResponse.json``,
because the bytes come from the network: every length and count is checked against the bytes
left before it is used (kio's native reader sizes a collection from its declared count, and a
huge one aborts the process: see ``seglog.server.request_lengths``), and anything that does not
fit raises :class:`MalformedResponseError`. A Fetch response's record sets are returned as
``memoryview`` slices of the response frame (no copy).

A broker connects to the others on its ``inter.broker.listener.name``
(:class:`InterBrokerListener`: that listener's name, whose endpoint is looked up in each
broker's registration, and a client TLS context when it speaks TLS).

A :class:`BrokerConnection` carries one request at a time (the fetcher never pipelines), with a
timeout on each; any failure (refused, reset, timeout, a bad frame, a correlation id that does
not match) raises a :class:`InterBrokerError` subclass and leaves the connection closed.
"""

from __future__ import annotations

import asyncio
import io
import ssl
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, NamedTuple, TypeVar

from kio.serial import entity_writer

from .. import error_codes as codes
from ..errors import SeglogError
from ..schemas import load_request_schema
from ..types import TopicPartition
from .sasl_login import SaslLogin, authenticate

__all__ = [
    "FETCH_KEY", "FETCH_VERSION", "OFFSET_FOR_LEADER_EPOCH_KEY", "OFFSET_FOR_LEADER_EPOCH_VERSION",
    "LIST_OFFSETS_KEY", "LIST_OFFSETS_VERSION", "LATEST_TIMESTAMP", "EARLIEST_TIMESTAMP",
    "InterBrokerError", "MalformedResponseError", "ConnectionLostError",
    "FetchPartitionRequest", "FetchPartitionResponse", "FetchResponse", "EpochEndOffset",
    "ListedOffset", "BrokerConnection", "InterBrokerListener", "encode_fetch_request",
    "encode_offset_for_leader_epoch_request", "encode_list_offsets_request",
    "decode_fetch_response", "decode_offset_for_leader_epoch_response",
    "decode_list_offsets_response", "whole_batches",
]

FETCH_KEY = 1
FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_KEY = 23
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_KEY = 2
LIST_OFFSETS_VERSION = 6
#: ListOffsets' sentinel timestamps (``ListOffsetsRequest.LATEST_TIMESTAMP`` / ``EARLIEST_...``).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
#: ``FetchMetadata.FINAL_EPOCH``: a full fetch request outside any fetch session.
_SESSIONLESS_EPOCH = -1

_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_SIZE = struct.Struct(">i")
#: A record batch's base offset and length (the first 12 bytes of every batch).
_BATCH_PREFIX = struct.Struct(">qi")
_LOG_OVERHEAD = _BATCH_PREFIX.size


class InterBrokerError(SeglogError):
    """A request to another broker failed at the connection level (the connection is closed)."""

    kafka_error_code = codes.UNKNOWN_SERVER_ERROR


class MalformedResponseError(InterBrokerError):
    """A response that does not decode: a length past the end, a bad varint, a frame larger
    than allowed, or a correlation id that was not sent."""


class ConnectionLostError(InterBrokerError):
    """The connection could not be made, was closed or reset, or a response did not come in
    time."""


class FetchPartitionRequest(NamedTuple):
    """One partition of a follower's Fetch request (Kafka's ``FetchRequest.PartitionData``)."""

    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int  # -1: none


class FetchPartitionResponse(NamedTuple):
    """One partition of a Fetch response; ``records`` is a memoryview of the frame (maybe
    empty); ``diverging_epoch`` is ``(epoch, end_offset)`` or None (Kafka's
    ``divergingEpoch``: present when its epoch is >= 0)."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview
    diverging_epoch: tuple[int, int] | None


class FetchResponse(NamedTuple):
    """A decoded Fetch response: the top-level error and session id, and the partitions."""

    error_code: int
    session_id: int
    partitions: dict[TopicPartition, FetchPartitionResponse]


class EpochEndOffset(NamedTuple):
    """One partition of an OffsetForLeaderEpoch response."""

    error_code: int
    leader_epoch: int
    end_offset: int


class ListedOffset(NamedTuple):
    """One partition of a ListOffsets response."""

    error_code: int
    offset: int
    leader_epoch: int


# --- encoding (kio's writers) ----------------------------------------------------------------


def _module_of(api_key: int, version: int) -> Any:
    import sys

    return sys.modules[load_request_schema(api_key, version).__module__]


_WRITERS: dict[type, Any] = {}


def _body(entity: Any) -> bytes:
    writer = _WRITERS.get(type(entity))
    if writer is None:
        writer = _WRITERS[type(entity)] = entity_writer(type(entity))
    buffer = io.BytesIO()
    writer(buffer, entity)
    return buffer.getvalue()


def _frame(api_key: int, version: int, correlation_id: int, client_id: str, body: bytes) -> bytes:
    """Size, request header v2 (key, version, correlation id, client id, no tagged fields),
    body."""
    raw_client = client_id.encode("utf-8")
    header = (_HEAD.pack(api_key, version, correlation_id) + _INT16.pack(len(raw_client))
              + raw_client + b"\x00")
    return _SIZE.pack(len(header) + len(body)) + header + body


def _by_topic(items: Iterable[tuple[TopicPartition, Any]]) -> dict[str, list[tuple[int, Any]]]:
    topics: dict[str, list[tuple[int, Any]]] = {}
    for tp, value in items:
        topics.setdefault(tp.topic, []).append((tp.partition, value))
    return topics


_FETCH_HEAD = struct.Struct(">iiiibii")  # replica, max wait, min, max bytes, isolation, session
_FETCH_PARTITION = struct.Struct(">iiqiqi")  # index, epoch, offset, last epoch, start, max bytes


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_fetch_request(*, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                         partitions: Mapping[TopicPartition, FetchPartitionRequest],
                         session_id: int = 0, session_epoch: int = _SESSIONLESS_EPOCH,
                         forgotten: Iterable[TopicPartition] = ()) -> bytes:
    """The body of a follower's Fetch v12 (read_uncommitted; sessionless unless a fetch
    session's id and epoch are given, with the partitions it forgets).

    Encoded here field by field (``FetchRequest.json`` at v12: the partitions' fields in
    schema order, the forgotten topics, an empty rack id, no tagged fields)
    rather than through kio's entities: a follower sends one per round for every partition
    it follows, and building kio's dataclasses cost ~23 us per partition."""
    out = bytearray(_FETCH_HEAD.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0,
                                     session_id, session_epoch))
    topics = _by_topic(partitions.items())
    out += _uvarint(len(topics) + 1)
    pack = _FETCH_PARTITION.pack
    for topic, entries in topics.items():
        raw = topic.encode("utf-8")
        out += _uvarint(len(raw) + 1)
        out += raw
        out += _uvarint(len(entries) + 1)
        for index, p in entries:
            out += pack(index, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                        p.log_start_offset, p.partition_max_bytes)
            out += b"\x00"  # the partition's tagged fields
        out += b"\x00"  # the topic's tagged fields
    gone: dict[str, list[int]] = {}
    for tp in forgotten:
        gone.setdefault(tp.topic, []).append(tp.partition)
    out += _uvarint(len(gone) + 1)  # forgotten_topics_data
    for topic, indexes in gone.items():
        raw = topic.encode("utf-8")
        out += _uvarint(len(raw) + 1)
        out += raw
        out += _uvarint(len(indexes) + 1)
        for index in indexes:
            out += _INT32.pack(index)
        out += b"\x00"  # the forgotten topic's tagged fields
    out += b"\x01"  # rack_id: ""
    out += b"\x00"  # the request's tagged fields
    return bytes(out)


def encode_offset_for_leader_epoch_request(
        *, replica_id: int, partitions: Mapping[TopicPartition, tuple[int, int]]) -> bytes:
    """The body of OffsetForLeaderEpoch v4; ``partitions`` maps each partition to
    ``(current_leader_epoch, leader_epoch)``."""
    m = _module_of(OFFSET_FOR_LEADER_EPOCH_KEY, OFFSET_FOR_LEADER_EPOCH_VERSION)
    topics = tuple(
        m.OffsetForLeaderTopic(topic=topic, partitions=tuple(
            m.OffsetForLeaderPartition(partition=index, current_leader_epoch=current,
                                       leader_epoch=epoch)
            for index, (current, epoch) in entries))
        for topic, entries in _by_topic(partitions.items()).items())
    return _body(m.OffsetForLeaderEpochRequest(replica_id=replica_id, topics=topics))


def encode_list_offsets_request(
        *, replica_id: int, partitions: Mapping[TopicPartition, tuple[int, int]]) -> bytes:
    """The body of ListOffsets v6 from a replica; ``partitions`` maps each partition to
    ``(current_leader_epoch, timestamp)``."""
    m = _module_of(LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION)
    topics = tuple(
        m.ListOffsetsTopic(name=topic, partitions=tuple(
            m.ListOffsetsPartition(partition_index=index, current_leader_epoch=current,
                                   timestamp=timestamp)
            for index, (current, timestamp) in entries))
        for topic, entries in _by_topic(partitions.items()).items())
    return _body(m.ListOffsetsRequest(replica_id=replica_id, isolation_level=0, topics=topics))


# --- decoding (by hand, bounds-checked) ------------------------------------------------------


#: What a response decoder returns (see BrokerConnection._decoded).
_Decoded = TypeVar("_Decoded")


class _Reader:
    """A cursor over a response frame; every read checks the bytes left."""

    __slots__ = ("buf", "pos", "end", "what")

    def __init__(self, buf: memoryview, what: str):
        self.buf = buf
        self.pos = 0
        self.end = len(buf)
        self.what = what

    def bad(self, why: str) -> MalformedResponseError:
        return MalformedResponseError(f"malformed {self.what} response at byte {self.pos}: {why}")

    def _fixed(self, st: struct.Struct) -> int:
        pos = self.pos
        if pos + st.size > self.end:
            raise self.bad("ends inside a field")
        self.pos = pos + st.size
        value: int = st.unpack_from(self.buf, pos)[0]
        return value

    def int8(self) -> int:
        return self._fixed(_INT8)

    def int16(self) -> int:
        return self._fixed(_INT16)

    def int32(self) -> int:
        return self._fixed(_INT32)

    def int64(self) -> int:
        return self._fixed(_INT64)

    def uvarint(self) -> int:
        value = shift = 0
        for _ in range(5):
            if self.pos >= self.end:
                raise self.bad("ends inside a varint")
            byte = self.buf[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise self.bad("varint longer than 5 bytes")

    def compact_bytes(self) -> memoryview | None:
        """Compact (nullable) bytes or string: uvarint length + 1, 0 for null."""
        length = self.uvarint() - 1
        if length < 0:
            return None
        if self.pos + length > self.end:
            raise self.bad(f"a length of {length} bytes runs past the end")
        start = self.pos
        self.pos = start + length
        return self.buf[start:self.pos]

    def compact_string(self) -> str:
        raw = self.compact_bytes()
        if raw is None:
            raise self.bad("null string")
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise self.bad("string is not UTF-8") from None

    def compact_count(self, min_element_bytes: int, *, nullable: bool = False) -> int:
        """A compact array's element count (-1 for null when ``nullable``), checked against
        the bytes left at ``min_element_bytes`` per element."""
        count = self.uvarint() - 1
        if count < 0:
            if nullable:
                return -1
            raise self.bad("null array")
        if count * min_element_bytes > self.end - self.pos:
            raise self.bad(f"an array of {count} elements cannot fit")
        return count

    def tagged_fields(self) -> dict[int, memoryview]:
        """A tagged-field section: ``{tag: its bytes}``."""
        count = self.uvarint()  # a plain count, not + 1
        if count * 2 > self.end - self.pos:
            raise self.bad(f"{count} tagged fields cannot fit")
        fields = {}
        for _ in range(count):
            tag = self.uvarint()
            size = self.uvarint()
            if self.pos + size > self.end:
                raise self.bad(f"a tagged field of {size} bytes runs past the end")
            fields[tag] = self.buf[self.pos:self.pos + size]
            self.pos += size
        return fields


def _response_header(frame: memoryview, what: str) -> tuple[int, _Reader]:
    """The correlation id of a response header v1 and a reader at the body."""
    reader = _Reader(frame, what)
    correlation_id = reader.int32()
    reader.tagged_fields()
    return correlation_id, reader


def _diverging_epoch(raw: memoryview, what: str) -> tuple[int, int] | None:
    reader = _Reader(raw, what + " DivergingEpoch")
    epoch = reader.int32()
    end_offset = reader.int64()
    reader.tagged_fields()
    return (epoch, end_offset) if epoch >= 0 else None


def decode_fetch_response(body: _Reader | memoryview | bytes) -> FetchResponse:
    """Decode a Fetch v12 response body (after the response header)."""
    reader = body if isinstance(body, _Reader) else _Reader(memoryview(body), "Fetch")
    reader.int32()  # throttle time
    error_code = reader.int16()
    session_id = reader.int32()
    partitions: dict[TopicPartition, FetchPartitionResponse] = {}
    # A topic is at least a name length, a partition count and a tag count; a partition at
    # least its fixed fields (4 + 2 + 8 * 3), the aborted list, the replica, records, tags.
    for _ in range(reader.compact_count(3)):
        topic = reader.compact_string()
        for _ in range(reader.compact_count(37)):
            index = reader.int32()
            code = reader.int16()
            high_watermark = reader.int64()
            last_stable_offset = reader.int64()
            log_start_offset = reader.int64()
            for _ in range(max(0, reader.compact_count(17, nullable=True))):
                reader.int64()  # producer id
                reader.int64()  # first offset
                reader.tagged_fields()
            reader.int32()  # preferred read replica
            records = reader.compact_bytes()
            tags = reader.tagged_fields()
            diverging = _diverging_epoch(tags[0], "Fetch") if 0 in tags else None
            partitions[TopicPartition(topic, index)] = FetchPartitionResponse(
                code, high_watermark, last_stable_offset, log_start_offset,
                records if records is not None else memoryview(b""), diverging)
        reader.tagged_fields()
    reader.tagged_fields()
    return FetchResponse(error_code, session_id, partitions)


def decode_offset_for_leader_epoch_response(
        body: _Reader | memoryview | bytes) -> dict[TopicPartition, EpochEndOffset]:
    """Decode an OffsetForLeaderEpoch v4 response body."""
    reader = (body if isinstance(body, _Reader)
              else _Reader(memoryview(body), "OffsetForLeaderEpoch"))
    reader.int32()  # throttle time
    result: dict[TopicPartition, EpochEndOffset] = {}
    for _ in range(reader.compact_count(3)):
        topic = reader.compact_string()
        for _ in range(reader.compact_count(19)):
            code = reader.int16()
            index = reader.int32()
            epoch = reader.int32()
            end_offset = reader.int64()
            reader.tagged_fields()
            result[TopicPartition(topic, index)] = EpochEndOffset(code, epoch, end_offset)
        reader.tagged_fields()
    reader.tagged_fields()
    return result


def decode_list_offsets_response(
        body: _Reader | memoryview | bytes) -> dict[TopicPartition, ListedOffset]:
    """Decode a ListOffsets v6 response body."""
    reader = body if isinstance(body, _Reader) else _Reader(memoryview(body), "ListOffsets")
    reader.int32()  # throttle time
    result: dict[TopicPartition, ListedOffset] = {}
    for _ in range(reader.compact_count(3)):
        topic = reader.compact_string()
        for _ in range(reader.compact_count(27)):
            index = reader.int32()
            code = reader.int16()
            reader.int64()  # timestamp
            offset = reader.int64()
            epoch = reader.int32()
            reader.tagged_fields()
            result[TopicPartition(topic, index)] = ListedOffset(code, offset, epoch)
        reader.tagged_fields()
    reader.tagged_fields()
    return result


def whole_batches(records: memoryview) -> memoryview:
    """The leading whole record batches of ``records``: a leader's read may end inside a batch
    (Kafka slices a segment by bytes), and a follower appends only the batches it got whole
    (Kafka's ``ByteBufferLogInputStream`` stops at a partial one). A batch length too small to
    be a batch ends the walk too; what follows is left to the append's own checks."""
    end = len(records)
    pos = 0
    while pos + _LOG_OVERHEAD <= end:
        _base, length = _BATCH_PREFIX.unpack_from(records, pos)
        if length <= 0 or pos + _LOG_OVERHEAD + length > end:
            break
        pos += _LOG_OVERHEAD + length
    return records[:pos] if pos < end else records


# --- the connection --------------------------------------------------------------------------


@dataclass(frozen=True)
class InterBrokerListener:
    """How a broker reaches the others: ``listener_name`` (normalised, ``"PLAINTEXT"``), the
    listener whose endpoint it connects to in each broker's registration, and
    ``ssl_context``, the client TLS context for that listener (None: plaintext)."""

    listener_name: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None

    def address(self, info: Any) -> tuple[str, int] | None:
        """The endpoint of this listener in ``info`` (a
        :class:`~seglog.cluster.zk_data.BrokerInfo`), None when that broker has none."""
        address: tuple[str, int] | None = info.address(self.listener_name)
        return address

    async def connect(self, host: str, port: int, *, client_id: str, timeout_ms: int,
                      max_response_bytes: int, login: SaslLogin | None = None
                      ) -> "BrokerConnection":
        """:meth:`BrokerConnection.connect` over this listener (TLS when it has a context;
        a SASL ``login`` after it)."""
        return await BrokerConnection.connect(host, port, client_id=client_id,
                                              timeout_ms=timeout_ms,
                                              max_response_bytes=max_response_bytes,
                                              ssl_context=self.ssl_context, login=login)



class BrokerConnection:
    """One TCP connection to a broker, one request at a time (see the module docstring).

    Open with :meth:`connect`. ``timeout_ms`` bounds the connect and each request's round
    trip; ``max_response_bytes`` bounds a response frame (larger: MalformedResponseError).
    Not safe for concurrent requests: the caller awaits each before sending the next."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 client_id: str, timeout_ms: int, max_response_bytes: int):
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._timeout_s = timeout_ms / 1000.0
        self._max_response_bytes = max_response_bytes
        self._correlation_id = 0
        self._closed = False

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str, timeout_ms: int,
                      max_response_bytes: int, ssl_context: ssl.SSLContext | None = None,
                      login: SaslLogin | None = None) -> "BrokerConnection":
        """Connect to ``host:port`` within ``timeout_ms`` (the TLS handshake included, with
        ``ssl_context``: the host name is checked when the context says so) and, with a
        ``login`` (a SASL inter-broker listener), log in (:mod:`.sasl_login`) within another
        ``timeout_ms``; ConnectionLostError if either fails."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ssl_context,
                                        server_hostname=host if ssl_context else None),
                timeout_ms / 1000.0)
        except (OSError, asyncio.TimeoutError) as e:  # ssl.SSLError is an OSError
            raise ConnectionLostError(f"cannot connect to {host}:{port}: {e!r}") from None
        if login is not None:
            try:
                await asyncio.wait_for(authenticate(reader, writer, login, client_id=client_id),
                                       timeout_ms / 1000.0)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                    SeglogError) as e:
                writer.close()
                raise ConnectionLostError(f"cannot log in to {host}:{port}: {e}") from None
        return cls(reader, writer, client_id=client_id, timeout_ms=timeout_ms,
                   max_response_bytes=max_response_bytes)

    @property
    def closed(self) -> bool:
        """Whether the connection is closed (after :meth:`close` or a failure)."""
        return self._closed

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if not self._closed:
            self._closed = True
            self._writer.close()

    async def request(self, api_key: int, version: int, body: bytes,
                      timeout_ms: int | None = None) -> tuple[memoryview, _Reader]:
        """Send one request and return ``(frame, reader at the response body)``;
        ``timeout_ms`` (default: the connection's) bounds the round trip. Closes the
        connection and raises an InterBrokerError on any failure."""
        if self._closed:
            raise ConnectionLostError("connection is closed")
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        timeout_s = self._timeout_s if timeout_ms is None else timeout_ms / 1000.0
        try:
            return await asyncio.wait_for(
                self._round_trip(api_key, version, correlation_id, body), timeout_s)
        except asyncio.TimeoutError:
            self.close()
            raise ConnectionLostError(
                f"no response to API key {api_key} within {timeout_s:.3f} s") from None
        except (OSError, asyncio.IncompleteReadError) as e:
            self.close()
            raise ConnectionLostError(f"connection lost: {e!r}") from None
        except BaseException:
            self.close()
            raise

    async def _round_trip(self, api_key: int, version: int, correlation_id: int,
                          body: bytes) -> tuple[memoryview, _Reader]:
        self._writer.write(_frame(api_key, version, correlation_id, self._client_id, body))
        await self._writer.drain()
        (size,) = _SIZE.unpack(await self._reader.readexactly(_SIZE.size))
        if size < _INT32.size or size > self._max_response_bytes:
            raise MalformedResponseError(
                f"response frame of {size} bytes (allowed: 4..{self._max_response_bytes})")
        frame = memoryview(await self._reader.readexactly(size))
        got, reader = _response_header(frame, f"API key {api_key}")
        if got != correlation_id:
            raise MalformedResponseError(
                f"response correlation id {got}, expected {correlation_id}")
        return frame, reader

    async def fetch(self, *, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                    partitions: Mapping[TopicPartition, FetchPartitionRequest],
                    timeout_ms: int | None = None, session_id: int = 0,
                    session_epoch: int = _SESSIONLESS_EPOCH,
                    forgotten: Iterable[TopicPartition] = ()) -> FetchResponse:
        """A follower's Fetch v12 (see :func:`encode_fetch_request`)."""
        body = encode_fetch_request(replica_id=replica_id, max_wait_ms=max_wait_ms,
                                    min_bytes=min_bytes, max_bytes=max_bytes,
                                    partitions=partitions, session_id=session_id,
                                    session_epoch=session_epoch, forgotten=forgotten)
        _frame_bytes, reader = await self.request(FETCH_KEY, FETCH_VERSION, body, timeout_ms)
        return self._decoded(decode_fetch_response, reader)

    async def offsets_for_leader_epoch(
            self, *, replica_id: int, partitions: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        """OffsetForLeaderEpoch v4: ``{tp: (current_leader_epoch, leader_epoch)}``."""
        body = encode_offset_for_leader_epoch_request(replica_id=replica_id,
                                                      partitions=partitions)
        _frame_bytes, reader = await self.request(
            OFFSET_FOR_LEADER_EPOCH_KEY, OFFSET_FOR_LEADER_EPOCH_VERSION, body)
        return self._decoded(decode_offset_for_leader_epoch_response, reader)

    async def list_offsets(
            self, *, replica_id: int, partitions: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, ListedOffset]:
        """ListOffsets v6 as a replica: ``{tp: (current_leader_epoch, timestamp)}``."""
        body = encode_list_offsets_request(replica_id=replica_id, partitions=partitions)
        _frame_bytes, reader = await self.request(LIST_OFFSETS_KEY, LIST_OFFSETS_VERSION, body)
        return self._decoded(decode_list_offsets_response, reader)

    def _decoded(self, decode: Callable[[_Reader], _Decoded], reader: _Reader) -> _Decoded:
        try:
            return decode(reader)
        except MalformedResponseError:
            self.close()
            raise
