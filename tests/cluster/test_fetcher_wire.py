"""The replica fetcher's wire layer (seglog.cluster.inter_broker): its requests decode as the
broker's own parser reads them, its hand-written response decoders read what kio's writers
(Kafka's schemas) and the broker's Fetch encoder produce, and bad bytes are a typed error.

Kafka's counterpart is the generated message code's round-trip tests (MessageTest) for
FetchResponse v12, OffsetForLeaderEpochResponse v4 and ListOffsetsResponse v6.
"""

from __future__ import annotations

import datetime
import io
import struct
import sys
import uuid

import pytest
from seglog.schemas import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from seglog.cluster import inter_broker as ib
from seglog.server.apis.data_fetch_codec import PartitionResult, encode_fetch_response, \
    fetch_body_bytes
from seglog.server.protocol import parse_request_header, read_request_body
from seglog.types import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TPU = TopicPartition("u", 2)


def _module(api_key, version):
    return sys.modules[load_response_schema(api_key, version).__module__]


def _write(entity) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _batch(base_offset: int, payload_bytes: int) -> bytes:
    """Bytes shaped like a record batch for the whole-batch walk (base offset, length)."""
    return struct.pack(">qi", base_offset, payload_bytes) + b"\x01" * payload_bytes


def _request(api_key: int, version: int, body: bytes):
    frame = ib._frame(api_key, version, 7, "broker-1-fetcher-0", body)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    header = parse_request_header(frame[4:], flexible=True)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == \
        (api_key, version, 7, "broker-1-fetcher-0")
    return read_request_body(api_key, version, frame[4:], header.body_offset)


def test_fetch_request_decodes_as_the_broker_reads_it():
    body = ib.encode_fetch_request(
        replica_id=3, max_wait_ms=500, min_bytes=1, max_bytes=10485760,
        partitions={TP0: ib.FetchPartitionRequest(10, 2, 1048576, 5, 4),
                    TP1: ib.FetchPartitionRequest(0, 0, 1024, 5, -1),
                    TPU: ib.FetchPartitionRequest(7, 7, 99, 0, 0)})
    request = _request(ib.FETCH_KEY, ib.FETCH_VERSION, body)
    assert request.replica_id == 3
    assert request.max_wait == datetime.timedelta(milliseconds=500)
    assert (request.min_bytes, request.max_bytes, request.isolation_level) == (1, 10485760, 0)
    assert (request.session_id, request.session_epoch) == (0, -1)
    got = {(t.topic, p.partition): (p.fetch_offset, p.log_start_offset, p.partition_max_bytes,
                                    p.current_leader_epoch, p.last_fetched_epoch)
           for t in request.topics for p in t.partitions}
    assert got == {("t", 0): (10, 2, 1048576, 5, 4), ("t", 1): (0, 0, 1024, 5, -1),
                   ("u", 2): (7, 7, 99, 0, 0)}


def test_offset_for_leader_epoch_and_list_offsets_requests_decode():
    request = _request(ib.OFFSET_FOR_LEADER_EPOCH_KEY, ib.OFFSET_FOR_LEADER_EPOCH_VERSION,
                       ib.encode_offset_for_leader_epoch_request(
                           replica_id=2, partitions={TP0: (4, 3), TPU: (1, -1)}))
    assert request.replica_id == 2
    assert {(t.topic, p.partition): (p.current_leader_epoch, p.leader_epoch)
            for t in request.topics for p in t.partitions} == {("t", 0): (4, 3),
                                                               ("u", 2): (1, -1)}
    request = _request(ib.LIST_OFFSETS_KEY, ib.LIST_OFFSETS_VERSION,
                       ib.encode_list_offsets_request(
                           replica_id=2, partitions={TP0: (4, ib.LATEST_TIMESTAMP),
                                                     TP1: (4, ib.EARLIEST_TIMESTAMP)}))
    assert request.replica_id == 2
    assert {(t.name, p.partition_index): (p.current_leader_epoch, p.timestamp)
            for t in request.topics for p in t.partitions} == {("t", 0): (4, -1),
                                                               ("t", 1): (4, -2)}


def _kio_fetch_response() -> bytes:
    m = _module(ib.FETCH_KEY, ib.FETCH_VERSION)
    records = _batch(5, 30) + _batch(6, 10)
    partitions = (
        m.PartitionData(partition_index=0, error_code=ErrorCode.none, high_watermark=6,
                        last_stable_offset=6, log_start_offset=1,
                        aborted_transactions=(m.AbortedTransaction(producer_id=9,
                                                                   first_offset=2),),
                        records=records),
        m.PartitionData(partition_index=1, error_code=ErrorCode.none, high_watermark=3,
                        last_stable_offset=3, log_start_offset=0,
                        diverging_epoch=m.EpochEndOffset(epoch=2, end_offset=17),
                        aborted_transactions=None, records=None),
    )
    topics = (m.FetchableTopicResponse(topic="t", partitions=partitions),
              m.FetchableTopicResponse(topic="u", partitions=(
                  m.PartitionData(partition_index=2, error_code=ErrorCode.fenced_leader_epoch,
                                  high_watermark=-1, aborted_transactions=None,
                                  records=None),)))
    return _write(m.FetchResponse(throttle_time=datetime.timedelta(0),
                                  error_code=ErrorCode.none, session_id=0, responses=topics))


def test_fetch_response_from_kio():
    body = _kio_fetch_response()
    response = ib.decode_fetch_response(body)
    assert (response.error_code, response.session_id) == (0, 0)
    p0 = response.partitions[TP0]
    assert (p0.error_code, p0.high_watermark, p0.last_stable_offset, p0.log_start_offset,
            p0.diverging_epoch) == (0, 6, 6, 1, None)
    assert bytes(p0.records) == _batch(5, 30) + _batch(6, 10)
    p1 = response.partitions[TP1]
    assert p1.diverging_epoch == (2, 17) and bytes(p1.records) == b""
    pu = response.partitions[TPU]
    assert pu.error_code == 74 and pu.diverging_epoch is None


def test_fetch_response_from_the_broker_encoder():
    records = _batch(0, 50)
    parts = encode_fetch_response(12, throttle_time_ms=0, error_code=0, session_id=0, topics=[
        ("t", [PartitionResult(0, 0, 1, 1, 0, None, memoryview(records)),
               PartitionResult(1, 6, -1, -1, -1, None, b"")])])
    response = ib.decode_fetch_response(fetch_body_bytes(parts))
    assert bytes(response.partitions[TP0].records) == records
    assert response.partitions[TP0].high_watermark == 1
    assert response.partitions[TP1].error_code == 6


def test_offset_for_leader_epoch_and_list_offsets_responses_from_kio():
    m = _module(ib.OFFSET_FOR_LEADER_EPOCH_KEY, ib.OFFSET_FOR_LEADER_EPOCH_VERSION)
    body = _write(m.OffsetForLeaderEpochResponse(
        throttle_time=datetime.timedelta(0), topics=(
            m.OffsetForLeaderTopicResult(topic="t", partitions=(
                m.EpochEndOffset(error_code=ErrorCode.none, partition=0, leader_epoch=3,
                                 end_offset=42),
                m.EpochEndOffset(error_code=ErrorCode.unknown_leader_epoch, partition=1,
                                 leader_epoch=-1, end_offset=-1))),)))
    assert ib.decode_offset_for_leader_epoch_response(body) == {
        TP0: ib.EpochEndOffset(0, 3, 42), TP1: ib.EpochEndOffset(75, -1, -1)}
    m = _module(ib.LIST_OFFSETS_KEY, ib.LIST_OFFSETS_VERSION)
    body = _write(m.ListOffsetsResponse(
        throttle_time=datetime.timedelta(0), topics=(
            m.ListOffsetsTopicResponse(name="u", partitions=(
                m.ListOffsetsPartitionResponse(partition_index=2, error_code=ErrorCode.none,
                                               timestamp=-1, offset=1234, leader_epoch=7),)),)))
    assert ib.decode_list_offsets_response(body) == {TPU: ib.ListedOffset(0, 1234, 7)}


@pytest.mark.parametrize("decode, body", [
    (ib.decode_fetch_response, _kio_fetch_response()),
    (ib.decode_offset_for_leader_epoch_response,
     bytes.fromhex("00000000") + b"\x02" + b"\x02t" + b"\x02" + bytes(18) + b"\x00\x00\x00"),
])
def test_every_truncation_is_a_typed_error(decode, body):
    decode(body)  # the whole body decodes
    for cut in range(len(body)):
        with pytest.raises(ib.MalformedResponseError):
            decode(body[:cut])


def test_huge_counts_and_lengths_are_refused_before_allocating():
    # A topics array claiming 2**32 - 2 entries (varint 0xffffffff), then nothing.
    huge = b"\xff\xff\xff\xff\x0f"
    with pytest.raises(ib.MalformedResponseError, match="cannot fit"):
        ib.decode_fetch_response(bytes(10) + huge)
    with pytest.raises(ib.MalformedResponseError, match="cannot fit"):
        ib.decode_list_offsets_response(bytes(4) + huge)
    with pytest.raises(ib.MalformedResponseError, match="varint"):
        ib.decode_offset_for_leader_epoch_response(bytes(4) + b"\xff" * 6)
    # A topic name longer than the body.
    with pytest.raises(ib.MalformedResponseError, match="past the end"):
        ib.decode_fetch_response(bytes(10) + b"\x02" + b"\x7f" + b"ab")
    # A name that is not UTF-8.
    with pytest.raises(ib.MalformedResponseError, match="UTF-8"):
        ib.decode_fetch_response(bytes(10) + b"\x02" + b"\x02\xff" + b"\x01\x00\x00")


def test_whole_batches_drops_a_partial_tail():
    two = _batch(0, 20) + _batch(1, 5)
    assert bytes(ib.whole_batches(memoryview(two))) == two
    assert bytes(ib.whole_batches(memoryview(two + _batch(2, 40)[:30]))) == two
    assert bytes(ib.whole_batches(memoryview(two + b"\x00" * 5))) == two
    assert bytes(ib.whole_batches(memoryview(_batch(0, 20)[:15]))) == b""
    assert bytes(ib.whole_batches(memoryview(b""))) == b""
    # A non-positive length ends the walk (what follows is the append's to refuse).
    assert bytes(ib.whole_batches(memoryview(two + struct.pack(">qi", 2, -5) + b"x" * 8))) \
        == two


def test_connection_errors_are_typed(tmp_path):
    import asyncio
    import socket

    async def scenario():
        # Nothing listens: refused.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with pytest.raises(ib.ConnectionLostError):
            await ib.BrokerConnection.connect("127.0.0.1", port, client_id="c",
                                              timeout_ms=2000, max_response_bytes=1 << 20)

        # A server that answers a frame too large, one with a wrong correlation id, and one
        # that never answers.
        behaviours = iter(["large", "wrong-id", "silent"])

        async def serve(reader, writer):
            behaviour = next(behaviours)
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
            correlation_id = struct.unpack(">i", frame[4:8])[0]
            if behaviour == "large":
                writer.write(struct.pack(">i", 1 << 30))
            elif behaviour == "wrong-id":
                body = struct.pack(">i", correlation_id + 1) + b"\x00" + bytes(10)
                writer.write(struct.pack(">i", len(body)) + body)
            await writer.drain()
            try:
                await asyncio.wait_for(reader.read(), 10)
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            for expected, timeout_ms in [("frame of", 2000), ("correlation id", 2000),
                                         ("no response", 200)]:
                conn = await ib.BrokerConnection.connect(
                    "127.0.0.1", port, client_id="c", timeout_ms=timeout_ms,
                    max_response_bytes=1 << 20)
                with pytest.raises(ib.InterBrokerError, match=expected):
                    await conn.list_offsets(replica_id=1, partitions={TP0: (0, -1)})
                assert conn.closed
                with pytest.raises(ib.ConnectionLostError):
                    await conn.list_offsets(replica_id=1, partitions={TP0: (0, -1)})
        finally:
            server.close()
            await asyncio.wait_for(server.wait_closed(), 10)

    asyncio.run(asyncio.wait_for(scenario(), 30))
