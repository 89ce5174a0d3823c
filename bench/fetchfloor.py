"""The floor under issue 27's consume-CPU target: the least a Python asyncio broker does to
answer a consumer's Fetch for one partition, run beside ``seglog serve`` and Kafka 4.4 under
the same raw client by ``fetchcpu.py floor`` (and ``floor-view``).

It is ``producefloor.py``'s floor (filled the same way: Produce v3-v10 of one topic, one
batch per request, written with one ``os.pwrite`` at the end of one file, plus here the
batch's base offset stamped, which a consumer walks by) with two more
answers, for ``fetchcpu.py``'s client: Metadata v12 (the topic and its id, built once with
kio) and Fetch v16 of one topic-id partition, sessionless. A Fetch is read by hand at the
fixed positions of a one-topic, one-partition request; the batch holding the fetch offset is
found by bisection in a list of the batches' offsets and file positions (kept as they were
written), and the answer is its header and then ``partition_max_bytes`` of the file from
that batch on (Kafka's rule: the last batch may be cut, the first is whole however large),
sent by ``os.sendfile`` from the file to the socket (Kafka's way; ``--send view`` writes a
view of the mapped file through the transport instead, seglog's way, without dropping the
pages after). The header goes through the transport, the records straight to the socket
while the transport holds nothing unsent, and requests that come in the meantime wait for
the send to end, in order.

What it leaves out is all of seglog's own work per Fetch: no kio decode or request-length
check, no fetch sessions, quotas, ACLs, isolation levels, aborted transactions, leader
epochs, metrics, delayed Fetches (it answers at once, even with nothing to return) and no
offset index (a list in memory). So its CPU per Fetch is what the event loop and the
kernel (the request's read, the answer's loopback send of 1 MiB) cost any Python broker: if
the floor alone is above 0.1x Kafka's CPU per record consumed, that target needs the kernel's
send cheaper than Kafka's own, not a faster seglog.

    python bench/fetchfloor.py --port 9099 --file /tmp/floor.log [--send view]

Never a broker to use: it checks nothing it stores or sends.
"""

from __future__ import annotations

import asyncio
import bisect
import datetime
import io
import mmap
import os
import struct
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import producefloor  # noqa: E402
from producefloor import (API_VERSIONS, FETCH, METADATA, PRODUCE,  # noqa: E402
                          FloorConnection, FloorServe, FloorState)

from seglog.server import protocol  # noqa: E402
from seglog.server.apis.data_wire import uvarint  # noqa: E402

#: Fetch v16 is what ``fetchcpu.py`` sends (by topic id, flexible); Metadata v12 answers
#: its topic-id lookup (librdkafka's producer is still offered v1 only).
FETCH_VERSION = 16
METADATA_TOPIC_ID_VERSION = 12
ADVERTISED = ((PRODUCE, 3, 10), (FETCH, 4, FETCH_VERSION), (METADATA, 1, 1),
              (API_VERSIONS, 0, 3))
#: How the records leave: ``sendfile`` (file to socket in the kernel) or ``view`` (a view of
#: the mapped file written through the asyncio transport).
SEND_MODES = ("sendfile", "view")
#: A one-topic, one-partition Fetch v16 body: max_wait, min_bytes, max_bytes, isolation,
#: session id and epoch; the topics' compact-array length (2: one), the topic id, the
#: partitions' length (2), then partition, current leader epoch, fetch offset, last fetched
#: epoch, log start offset, partition max bytes.
_FETCH_HEAD = struct.Struct(">iiibii")
_FETCH_PARTITION = struct.Struct(">iiqiqi")
_TOPIC_AT = _FETCH_HEAD.size + 1
_PARTITION_AT = _TOPIC_AT + 16 + 1
#: The answer's body up to its records' length: throttle, error, session id, topics (2),
#: topic id, partitions (2), index, error, high watermark, last stable offset, log start
#: offset, aborted transactions (0: null), preferred read replica.
_ANSWER_HEAD = struct.Struct(">ihiB16sBihqqqBi")
#: After the records: the partition's, the topic's and the body's empty tagged fields.
_ANSWER_TAIL = b"\x00\x00\x00"
#: The int32 frame size, then response header v1: the correlation id and no tagged fields.
_SIZE_AND_ID = struct.Struct(">ii")
_RESPONSE_HEADER_V1_BYTES = 5
_BASE_OFFSET = struct.Struct(">q")


class FetchFloorState(FloorState):
    """The produce floor's file and offsets, for one topic, plus where each batch starts (for
    Fetch) and a topic id."""

    def __init__(self, path: Path, host: str, port: int, send_mode: str):
        super().__init__(path, host, port)
        self.file = open(path, "rb")  # noqa: SIM115 (the floor's life long)
        self.send_mode = send_mode
        self.topic: str | None = None
        self.topic_id = uuid.uuid4()
        self.base_offsets: list[int] = []
        self.positions: list[int] = []
        self._map: mmap.mmap | None = None

    def produce(self, version: int, body: memoryview) -> bytes | None:
        """The produce floor's answer, the batch's base offset stamped, and its offset and
        position remembered (the request read twice, the offset written apart: filling is
        not what is measured)."""
        single = producefloor.wire.read_produce_single(version, body)
        name = single[3] if single is not None else None
        if name is not None and self.topic is not None and name != self.topic:
            raise ValueError("the fetch floor holds one topic")
        position = self.position_bytes
        base_offset = self.next_offsets.get(name or "", 0)
        out = super().produce(version, body)
        if self.position_bytes > position:
            # The batch's base offset stamped (the produce floor leaves the producer's 0), so
            # that a consumer walks the log by the offsets it reads.
            os.pwrite(self.fd, _BASE_OFFSET.pack(base_offset), position)
            self.topic = name
            self.base_offsets.append(base_offset)
            self.positions.append(position)
        return out

    def metadata_topic_id(self) -> bytes:
        """Metadata v12's answer (kio, once per client): this broker and the floor's topic
        with its id, whichever topic was asked for."""
        from kio.schema.errors import ErrorCode
        from kio.schema.metadata.v12 import response as v12
        from kio.schema.types import BrokerId, TopicName
        from kio.serial import entity_writer
        from kio.static.primitive import i32, i32Timedelta

        partition = v12.MetadataResponsePartition(
            error_code=ErrorCode.none, partition_index=i32(0), leader_id=BrokerId(0),
            leader_epoch=i32(0), replica_nodes=(BrokerId(0),), isr_nodes=(BrokerId(0),),
            offline_replicas=())
        topic = v12.MetadataResponseTopic(
            error_code=ErrorCode.none, name=TopicName(self.topic or ""),
            topic_id=self.topic_id, is_internal=False, partitions=(partition,),
            topic_authorized_operations=i32(-2147483648))
        response = v12.MetadataResponse(
            throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
            brokers=(v12.MetadataResponseBroker(node_id=BrokerId(0), host=self.host,
                                                port=i32(self.port), rack=None),),
            cluster_id="floor", controller_id=BrokerId(0), topics=(topic,))
        out = io.BytesIO()
        entity_writer(v12.MetadataResponse)(out, response)
        return out.getvalue()

    def fetch_range(self, body: memoryview) -> tuple[bytes, int, int]:
        """A Fetch v16's answer: its body up to and with the records' length, and the file
        position and byte count of the records (0 bytes when there is nothing to return)."""
        if body[_FETCH_HEAD.size] != 2 or body[_PARTITION_AT - 1] != 2:
            raise ValueError("not a one-topic, one-partition Fetch")
        topic_id = bytes(body[_TOPIC_AT:_TOPIC_AT + 16])
        if topic_id != self.topic_id.bytes:
            raise ValueError("an unknown topic id")
        index, _epoch, offset, _last_epoch, _start, max_bytes = \
            _FETCH_PARTITION.unpack_from(body, _PARTITION_AT)
        end_offset = self.next_offsets.get(self.topic or "", 0)
        start = count = 0
        if 0 <= offset < end_offset:
            at = bisect.bisect_right(self.base_offsets, offset) - 1
            start = self.positions[at]
            first_end = self.positions[at + 1] if at + 1 < len(self.positions) \
                else self.position_bytes
            count = max(min(max_bytes, self.position_bytes - start), first_end - start)
        head = _ANSWER_HEAD.pack(0, 0, 0, 2, topic_id, 2, index, 0, end_offset, end_offset,
                                 0, 0, -1) + uvarint(count + 1)
        return head, start, count

    def view(self, start: int, count: int) -> memoryview:
        """``count`` bytes of the file from ``start`` as a view of its mapping (mapped again
        when the file has grown past it)."""
        if self._map is None or start + count > len(self._map):
            # The old mapping is left to the views still alive (the transport's copies
            # hold none); one more mapping per growth of a file that is filled once.
            self._map = mmap.mmap(self.file.fileno(), self.position_bytes,
                                  access=mmap.ACCESS_READ)
        return memoryview(self._map)[start:start + count]


class FetchFloorConnection(FloorConnection):
    """The produce floor's connection, listing Fetch v16 and answering Metadata v12 and Fetch
    v16 too. A Fetch's records leave after its header: by ``loop.sendfile``
    (asyncio's way to hand a file to a transport's socket: it waits for the transport to
    empty and pauses reading meanwhile), the frames after it in the same read held until
    it is done; or as a view of the mapping written through the transport."""

    state: FetchFloorState
    advertised = ADVERTISED

    def answer(self, frame: memoryview) -> bytes | None:
        api_key, version = struct.unpack_from(">hh", frame, 0)
        if api_key != FETCH and not (
                api_key == METADATA and version == METADATA_TOPIC_ID_VERSION):
            return super().answer(frame)
        header = producefloor.wire.read_request_header(
            frame, protocol.is_flexible_request(api_key, version))
        if header is None:
            raise ValueError(f"unreadable request header (api {api_key} v{version})")
        correlation_id = header[2]
        if api_key == METADATA:
            return b"".join(protocol.encode_response(
                correlation_id, flexible=True, body_parts=(self.state.metadata_topic_id(),)))
        if version != FETCH_VERSION:
            raise ValueError(f"the floor answers Fetch v{FETCH_VERSION} only, not v{version}")
        head, start, count = self.state.fetch_range(frame[header[4]:])
        # The frame's size and response header v1 (correlation id, no tags) by hand: the
        # records are not a bytes part here to count.
        size = _RESPONSE_HEADER_V1_BYTES + len(head) + count + len(_ANSWER_TAIL)
        transport = self.transport
        assert transport is not None
        # This read's earlier answers first, then this one's header.
        self.answers.append(_SIZE_AND_ID.pack(size, correlation_id) + b"\x00" + head)
        transport.write(b"".join(self.answers))
        self.answers.clear()
        if count == 0:
            transport.write(_ANSWER_TAIL)
        elif self.state.send_mode == "view":
            transport.write(self.state.view(start, count))
            transport.write(_ANSWER_TAIL)
        else:
            self.held = True
            asyncio.get_running_loop().create_task(self._send_records(start, count))
        return None

    async def _send_records(self, position: int, count: int) -> None:
        """The records from the file to the socket, the answer's tail, then the frames that
        waited."""
        transport = self.transport
        assert transport is not None
        try:
            await asyncio.get_running_loop().sendfile(transport, self.state.file, position,
                                                      count, fallback=False)
        except (ConnectionError, RuntimeError):
            transport.abort()
            return
        transport.write(_ANSWER_TAIL)
        self.held = False
        self.data_received(b"")


class FetchFloorServe(FloorServe):
    """The fetch floor in a subprocess of its own (``FloorServe`` with ``--send``)."""

    def __init__(self, data_dir: Path, *, send_mode: str = "sendfile", **options: Any):
        super().__init__(data_dir, **options)
        if send_mode not in SEND_MODES:
            raise ValueError(f"send mode {send_mode!r}: one of {SEND_MODES}")
        self.send_mode = send_mode

    def command(self) -> list[str]:
        """This script with the produce floor's arguments and ``--send``."""
        return [__file__, *super().command()[1:], "--send", self.send_mode]


def main() -> None:
    """``--port``, ``--file`` and ``--send``: serve the fetch floor."""
    parser = producefloor.arguments(__doc__)
    parser.add_argument("--send", choices=SEND_MODES, default="sendfile")
    args = parser.parse_args()
    state = FetchFloorState(Path(args.file), args.host, args.port, args.send)
    producefloor.serve(args.host, args.port, lambda: FetchFloorConnection(state))


if __name__ == "__main__":
    main()
