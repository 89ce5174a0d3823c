"""The broker's CPU per Fetch, measured with a client that costs nothing and never sleeps
(issue 27, "CPU-seconds per million records consumed").

A default confluent-kafka consumer sleeps whenever its queue is full (``fetch.queue.backoff.ms``)
and a Java consumer spends seconds joining its group: over such a run a broker's idle CPU (2%
of a core for Kafka 4.4) is a large share of what is measured. Here this process is the client:
one connection per broker, Fetch v16 requests written by hand (one partition,
``partition_max_bytes`` 1 MiB, ``max_bytes`` 50 MiB, ``min_bytes`` 1, sessionless: what
librdkafka sends), each response read whole before the next request, walking the partition from
offset 0 to its end. The broker's CPU comes from its threads' ``schedstat`` (nanoseconds) around
each walk, per Fetch, also net of the broker's idle rate measured over 10 s before the rounds.

Brokers: ``seglog serve`` once per PYTHONPATH given (a before/after in one run: another
checkout's ``src``), the word ``kafka`` for a single-node KRaft Kafka 4.4
(:class:`seglog.bench.kafka.KafkaBroker`), and ``floor`` / ``floor-view`` for the fetch floor
(``fetchfloor.py``: what any Python asyncio broker pays, records by sendfile / by a mapped
view). Each is filled with the same records (the bench's
confluent-kafka producer, 100-byte values, acks=1), warmed up with two walks (Kafka's JIT), then
the rounds alternate the brokers, the order reversed every other round.

``--empty`` asks for the log end instead, with ``max_wait_ms`` 0 (2,000 requests per round):
the per-request cost without records (decode, handler, event loop, the small send).

    PYTHONPATH=src python bench/fetchcpu.py --records 1000000 --rounds 5 src ../main/src kafka
    PYTHONPATH=src python bench/fetchcpu.py --records 1000000 --rounds 5 src kafka floor floor-view
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from consumewire import process_run_s  # noqa: E402

FETCH_VERSION = 16
METADATA_VERSION = 12
EMPTY_REQUESTS = 2000
#: Broker words for the fetch floor (``fetchfloor.py``), by how it sends the records.
FLOORS = {"floor": "sendfile", "floor-view": "view"}


def _schema_module(cls: type) -> Any:
    return __import__(cls.__module__, fromlist=["_"])


def frame(api_key: int, version: int, correlation_id: int, request: Any) -> bytes:
    """A request frame (size, header v2 with this client's id, kio's encoding of
    ``request``)."""
    from kio.serial import entity_writer

    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    client_id = b"fetchcpu"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) \
        + client_id + b"\x00"  # request header v2: no tagged fields
    payload = header + body.getvalue()
    return struct.pack(">i", len(payload)) + payload


def receive(sock: socket.socket, buffer: bytearray) -> memoryview:
    """One whole response (without its size) into ``buffer``."""
    def exactly(n: int) -> memoryview:
        view = memoryview(buffer)[:n]
        got = 0
        while got < n:
            k = sock.recv_into(view[got:])
            if not k:
                raise EOFError("the broker closed the connection")
            got += k
        return view
    (size,) = struct.unpack(">i", bytes(exactly(4)))
    return exactly(size)


def metadata_topic_id(sock: socket.socket, topic: str, buffer: bytearray) -> Any:
    """``topic``'s id, asked by Metadata v12 on ``sock``."""
    from kio.serial import entity_reader

    from seglog.schemas import load_request_schema, load_response_schema

    cls = load_request_schema(3, METADATA_VERSION)
    mod = _schema_module(cls)
    request = cls(topics=(mod.MetadataRequestTopic(name=topic, topic_id=None),),
                  allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    sock.sendall(frame(3, METADATA_VERSION, 1, request))
    data = receive(sock, buffer)
    # Response header v1: correlation id, then an empty tagged-field section.
    response, _ = entity_reader(load_response_schema(3, METADATA_VERSION))(
        memoryview(bytes(data)), 5)
    return response.topics[0].topic_id


def fetch_request(topic_id: Any, offset: int, max_wait_ms: int,
                  partition_max_bytes: int = 1024 * 1024) -> Any:
    """The sessionless one-partition Fetch v16 request this client sends (partition 0 of
    ``topic_id`` from ``offset``), as a kio entity."""
    from seglog.schemas import load_request_schema

    cls = load_request_schema(1, FETCH_VERSION)
    mod = _schema_module(cls)
    return cls(replica_state=mod.ReplicaState(replica_id=-1, replica_epoch=-1),
               max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
               max_bytes=50 * 1024 * 1024, isolation_level=0, session_id=0, session_epoch=-1,
               topics=(mod.FetchTopic(topic_id=topic_id, partitions=(mod.FetchPartition(
                   partition=0, current_leader_epoch=-1, fetch_offset=offset,
                   last_fetched_epoch=-1, log_start_offset=-1,
                   partition_max_bytes=partition_max_bytes),)),),
               forgotten_topics_data=(), rack_id="")


#: Bytes of a one-partition Fetch v16 response before its records' length: correlation id,
#: header tags, throttle, error, session id, topics (1), topic id, partitions (1), index,
#: error, high watermark, last stable offset, log start offset, aborted (null), preferred
#: read replica.
RECORDS_AT = 4 + 1 + 4 + 2 + 4 + 1 + 16 + 1 + 4 + 2 + 8 + 8 + 8 + 1 + 4


def whole_batches(data: memoryview) -> tuple[memoryview, int]:
    """The whole batches of a one-partition Fetch v16 response's records (Kafka may cut the
    last batch partway) and where the last of them starts in that view (-1: none)."""
    position, shift, length = RECORDS_AT, 0, 0
    while True:
        byte = data[position]
        position += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    records = data[position:position + max(length - 1, 0)]
    end, last = 0, -1
    while end + 12 <= len(records):
        (size,) = struct.unpack_from(">i", records, end + 8)
        if end + 12 + size > len(records):
            break
        last, end = end, end + 12 + size
    return records[:end], last


def _next_offset(data: memoryview) -> int:
    """The offset after the last whole batch of a one-partition response."""
    records, last = whole_batches(data)
    if last < 0:
        raise RuntimeError("a Fetch response without a whole batch")
    (base_offset,) = struct.unpack_from(">q", records, last)
    (last_offset_delta,) = struct.unpack_from(">i", records, last + 23)
    return base_offset + last_offset_delta + 1


def walk(sock: socket.socket, topic_id: Any, records: int, buffer: bytearray, *,
         empty: bool) -> int:
    """Fetch the partition from 0 to ``records`` (or, ``empty``, ask for the log end
    EMPTY_REQUESTS times); the number of requests."""
    if empty:
        for correlation_id in range(EMPTY_REQUESTS):
            sock.sendall(frame(1, FETCH_VERSION, correlation_id,
                               fetch_request(topic_id, records, 0)))
            receive(sock, buffer)
        return EMPTY_REQUESTS
    offset, fetches = 0, 0
    while offset < records:
        sock.sendall(frame(1, FETCH_VERSION, fetches, fetch_request(topic_id, offset, 500)))
        next_offset = _next_offset(receive(sock, buffer))
        if next_offset <= offset:  # a broker that does not move the walk on: never ending
            raise RuntimeError(f"a Fetch at offset {offset} answered up to {next_offset}")
        offset = next_offset
        fetches += 1
    return fetches


def _summary(values: list[float], digits: int = 1) -> str:
    xs = sorted(values)
    return "/".join(f"{x:.{digits}f}" for x in (xs[0], statistics.median(xs), xs[-1]))


def main() -> None:
    """Run the rounds and print one line per walk and the summaries."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("brokers", nargs="+",
                        help="a PYTHONPATH for a seglog serve, 'kafka' for Kafka 4.4, or "
                             "'floor' / 'floor-view' for the fetch floor")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--empty", action="store_true",
                        help="requests at the log end (no records): the per-request cost")
    args = parser.parse_args()
    from seglog.bench.broker import SeglogServe, run_client
    from seglog.bench.kafka import KafkaBroker, find_kafka

    scratch = Path(tempfile.mkdtemp(prefix="fetchcpu-"))
    names = list(dict.fromkeys(args.brokers))
    brokers: list[Any] = []
    try:
        for index, name in enumerate(names):
            if name == "kafka":
                ref, why = find_kafka()
                if ref is None:
                    raise SystemExit(why)
                broker: Any = KafkaBroker(ref, scratch / "kafka")
                broker.format()
                broker.start()
            elif name in FLOORS:
                from fetchfloor import FetchFloorServe

                broker = FetchFloorServe(scratch / name, send_mode=FLOORS[name])
                broker.start()
            else:
                saved = os.environ.get("PYTHONPATH")
                os.environ["PYTHONPATH"] = name
                try:
                    broker = SeglogServe(scratch / f"seglog-{index}")
                    broker.start()
                finally:
                    if saved is None:
                        os.environ.pop("PYTHONPATH", None)
                    else:
                        os.environ["PYTHONPATH"] = saved
            brokers.append(broker)
            filled = run_client("produce", broker.bootstrap, "fetchcpu", records=args.records,
                                record_bytes=100, acks="1")
            print(f"# filled {name}: {filled}", flush=True)
        buffer = bytearray(8 << 20)
        connections = []
        for broker in brokers:
            host, port = broker.bootstrap.rsplit(":", 1)
            sock = socket.create_connection((host, int(port)))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connections.append((sock, metadata_topic_id(sock, "fetchcpu", buffer)))
        for sock, topic_id in connections:  # warm-up (Kafka's JIT)
            for _ in range(2):
                walk(sock, topic_id, args.records, buffer, empty=args.empty)
        before = [process_run_s(b.pid) for b in brokers]
        time.sleep(10)
        idle = {name: (process_run_s(b.pid) - cpu) / 10
                for name, b, cpu in zip(names, brokers, before)}
        print(f"# idle CPU s per s: {idle}", flush=True)
        gross: dict[str, list[float]] = {name: [] for name in names}
        net: dict[str, list[float]] = {name: [] for name in names}
        for rnd in range(args.rounds):
            order = list(range(len(brokers)))
            if rnd % 2:
                order.reverse()
            for i in order:
                name, (sock, topic_id) = names[i], connections[i]
                cpu0, t0 = process_run_s(brokers[i].pid), time.monotonic()
                requests = walk(sock, topic_id, args.records, buffer, empty=args.empty)
                cpu_s = process_run_s(brokers[i].pid) - cpu0
                wall_s = time.monotonic() - t0
                gross[name].append(cpu_s / requests * 1e6)
                net[name].append((cpu_s - idle[name] * wall_s) / requests * 1e6)
                print(f"round {rnd + 1} {name}: {requests} requests in {wall_s:.2f} s, "
                      f"{gross[name][-1]:.1f} us CPU each ({net[name][-1]:.1f} net of idle), "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
        for name in names:
            print(f"## {name}: broker CPU us per request min/median/max "
                  f"{_summary(gross[name])}; net of idle {_summary(net[name])}")
        for a in names:
            for b in names:
                if a == b or a == "kafka" or (b != "kafka" and names.index(a) > names.index(b)):
                    continue
                print(f"## ratio {a} / {b} min/median/max "
                      f"{_summary([x / y for x, y in zip(gross[a], gross[b])], 3)}; net of idle "
                      f"{_summary([x / y for x, y in zip(net[a], net[b])], 3)}")
    finally:
        for broker in brokers:
            broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
