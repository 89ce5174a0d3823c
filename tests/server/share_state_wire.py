"""Raw-wire helpers of the share-state tests: the 83-87 requests built with kio's classes,
sent over one TCP connection, and their answers in a form two brokers can be compared in."""

from __future__ import annotations

import dataclasses
import io
import socket
import struct
import sys
import uuid
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

from seglog.schemas import load_request_schema, load_response_schema

INITIALIZE, READ, WRITE, DELETE, SUMMARY, FIND_COORDINATOR = 83, 84, 85, 86, 87, 10


def _module(api_key: int, version: int) -> Any:
    return sys.modules[load_request_schema(api_key, version).__module__]


def initialize(group, topic_id, partition, state_epoch, start_offset, *, version=0):
    m = _module(INITIALIZE, version)
    return m.InitializeShareGroupStateRequest(group_id=group, topics=(m.InitializeStateData(
        topic_id=topic_id, partitions=(m.PartitionData(
            partition=i32(partition), state_epoch=i32(state_epoch),
            start_offset=i64(start_offset)),)),))


def read(group, topic_id, partition, leader_epoch, *, version=0):
    m = _module(READ, version)
    return m.ReadShareGroupStateRequest(group_id=group, topics=(m.ReadStateData(
        topic_id=topic_id, partitions=(m.PartitionData(
            partition=i32(partition), leader_epoch=i32(leader_epoch)),)),))


def write(group, topic_id, partition, *, state_epoch, leader_epoch, start_offset,
          batches=(), delivery_complete_count=-1, version=1):
    m = _module(WRITE, version)
    fields = dict(partition=i32(partition), state_epoch=i32(state_epoch),
                  leader_epoch=i32(leader_epoch), start_offset=i64(start_offset),
                  state_batches=tuple(m.StateBatch(
                      first_offset=i64(f), last_offset=i64(last), delivery_state=i8(s),
                      delivery_count=i16(c)) for f, last, s, c in batches))
    if version >= 1:
        fields["delivery_complete_count"] = i32(delivery_complete_count)
    return m.WriteShareGroupStateRequest(group_id=group, topics=(m.WriteStateData(
        topic_id=topic_id, partitions=(m.PartitionData(**fields),)),))


def delete(group, topic_id, partition, *, version=0):
    m = _module(DELETE, version)
    return m.DeleteShareGroupStateRequest(group_id=group, topics=(m.DeleteStateData(
        topic_id=topic_id, partitions=(m.PartitionData(partition=i32(partition)),)),))


def summary(group, topic_id, partition, leader_epoch=0, *, version=1):
    m = _module(SUMMARY, version)
    return m.ReadShareGroupStateSummaryRequest(group_id=group, topics=(m.ReadStateSummaryData(
        topic_id=topic_id, partitions=(m.PartitionData(
            partition=i32(partition), leader_epoch=i32(leader_epoch)),)),))


def find_share_coordinator(key: str, *, version=6):
    m = _module(FIND_COORDINATOR, version)
    return m.FindCoordinatorRequest(key_type=i8(2), coordinator_keys=(key,))


def call(address, request, *, client_id="share-state-wire", timeout_s=30.0):
    """Send ``request`` (a kio request entity) and return kio's decoded response."""
    header_class = type(request).__header_schema__
    fields = {f.name for f in dataclasses.fields(header_class)}
    header = dict(request_api_key=type(request).__api_key__,
                  request_api_version=type(request).__version__, correlation_id=7)
    if "client_id" in fields:
        header["client_id"] = client_id
    buffer = io.BytesIO()
    entity_writer(header_class)(buffer, header_class(**header))
    entity_writer(type(request))(buffer, request)
    data = buffer.getvalue()
    with socket.create_connection(address, timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(struct.pack(">i", len(data)) + data)
        size = struct.unpack(">i", _exactly(sock, 4))[0]
        body = _exactly(sock, size)
    response_class = load_response_schema(type(request).__api_key__, type(request).__version__)
    _, offset = entity_reader(response_class.__header_schema__)(body, 0)
    value, _ = entity_reader(response_class)(body, offset)
    return value


def _exactly(sock, count):
    out = b""
    while len(out) < count:
        chunk = sock.recv(count - len(out))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        out += chunk
    return out


#: The collections whose order is a map's in Kafka's answers (compared as sets); every other
#: list keeps its order (state batches are in offset order).
_UNORDERED = frozenset({"results", "partitions"})


def plain(response) -> Any:
    """The response as plain data (lists, dicts, ints, strings; topic ids as text), results
    and partitions sorted so that two brokers' answers compare."""
    def convert(value, name=""):
        if dataclasses.is_dataclass(value):
            return {f.name: convert(getattr(value, f.name), f.name)
                    for f in dataclasses.fields(value)}
        if isinstance(value, tuple):
            items = [convert(v) for v in value]
            return sorted(items, key=repr) if name in _UNORDERED else items
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, (int, str)) or value is None:
            return value if not isinstance(value, int) else int(value)
        return repr(value)
    return convert(response)


def partition_answer(response) -> dict:
    """The one partition result of a single-partition answer, as a dict."""
    results = plain(response)["results"]
    assert len(results) == 1 and len(results[0]["partitions"]) == 1, results
    return results[0]["partitions"][0]


def read_many(group, topics, *, version=0):
    """A ReadShareGroupState of several topics: ``topics`` is ``[(topic id, [(partition,
    leader epoch), ...]), ...]`` (a topic or partition may repeat)."""
    m = _module(READ, version)
    return m.ReadShareGroupStateRequest(group_id=group, topics=tuple(
        m.ReadStateData(topic_id=topic_id, partitions=tuple(
            m.PartitionData(partition=i32(p), leader_epoch=i32(e)) for p, e in parts))
        for topic_id, parts in topics))
