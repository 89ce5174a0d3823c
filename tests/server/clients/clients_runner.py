"""The real clients, driven the same way against any broker: what each one saw, as plain data.

Every helper here takes a ``bootstrap`` (``host:port``) and talks to whatever listens there, the
real Apache Kafka broker or ``seglog serve``, through an unmodified client: confluent-kafka
(librdkafka), kafka-python, aiokafka, kcat (a subprocess) and Kafka's Java console tools. What
they return is plain data (lists of :class:`Seen`, offsets, error codes) with nothing in it that
legitimately differs between two brokers (timestamps the broker assigned, cluster and member
ids), so the differential tests compare the two results with ``==``.

Every wait is bounded: client timeouts, poll loops with a deadline, subprocess timeouts.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

#: The longest any one client operation (produce and flush, consume to the end) may take.
OP_TIMEOUT_S = 30.0
#: kcat's path (Debian's package installs /usr/bin/kcat); None when it is absent.
KCAT = shutil.which("kcat")
#: The five codecs Kafka knows, by the name every client uses.
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Group timeouts short enough that a killed member is evicted in a second or two; both
#: brokers run with ``group.min.session.timeout.ms`` below it (see conftest.py).
SESSION_TIMEOUT_MS = 1500
HEARTBEAT_INTERVAL_MS = 300

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Rec:
    """A record to produce: key and value bytes or None, headers as ``(name, value)`` (a
    header value may be None too)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    partition: int = 0
    timestamp_ms: int | None = None


@dataclass(frozen=True, order=True)
class Seen:
    """A record as a consumer saw it (no broker-assigned timestamp: that legitimately differs)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def records(prefix: str, n: int, *, partition: int = 0, both_null: bool = True) -> list[Rec]:
    """``n`` records with every shape a client must carry: keys and values, a null key, a
    null value, a record with both null (unless ``both_null=False``: kafka-python and
    aiokafka refuse to send one), headers (several, a repeated name, an empty value) and
    records without any."""
    out = []
    for i in range(n):
        key: bytes | None = f"{prefix}-k{i}".encode()
        value: bytes | None = f"{prefix}-v{i}".encode() * (1 + i % 3)
        headers: tuple[tuple[str, bytes], ...] = ()
        if i % 5 == 1:
            key = None
        if i % 5 == 2:
            value = None
        if i % 5 == 3 and both_null:
            key = value = None
        if i % 2 == 0:
            headers = (("trace", f"{prefix}-{i}".encode()), ("h", b""), ("h", b"again"))
        out.append(Rec(key, value, headers, partition))
    return out


def expected(recs: list[Rec], first_offset: int = 0) -> list[Seen]:
    """What a consumer must see for ``recs`` produced in order to one empty partition."""
    return [Seen(r.partition, first_offset + i, r.key, r.value, r.headers)
            for i, r in enumerate(recs)]


def _deadline(timeout_s: float) -> float:
    return time.monotonic() + timeout_s


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _headers(raw) -> tuple[tuple[str, bytes], ...]:
    if not raw:
        return ()
    return tuple((k if isinstance(k, str) else k.decode(), bytes(v) if v is not None else None)
                 for k, v in raw)


# ---- admin (confluent-kafka's AdminClient) ----

def admin(bootstrap: str):
    """A confluent-kafka AdminClient."""
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create_topic(bootstrap: str, name: str, partitions: int = 1, *,
                 config: dict | None = None, timeout_s: float = OP_TIMEOUT_S) -> None:
    """CreateTopics through the AdminClient, then wait until every partition has a leader."""
    from confluent_kafka.admin import NewTopic
    client = admin(bootstrap)
    futures = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        request_timeout=timeout_s, operation_timeout=timeout_s)
    futures[name].result(timeout=timeout_s)
    deadline = _deadline(timeout_s)
    while True:
        md = client.list_topics(name, timeout=max(1.0, _left(deadline)))
        topic = md.topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions \
                and all(p.leader >= 0 for p in topic.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name}: partitions without a leader after {timeout_s} s")
        time.sleep(0.05)


def describe_group(bootstrap: str, group: str, timeout_s: float = 10.0) -> dict:
    """DescribeGroups: state, the assignor chosen, and how many partitions each member
    holds (sorted; member ids differ between brokers)."""
    client = admin(bootstrap)
    desc = client.describe_consumer_groups([group], request_timeout=timeout_s)[group].result(
        timeout=timeout_s)
    sizes = sorted(len(m.assignment.topic_partitions) if m.assignment else 0 for m in desc.members)
    return {"state": desc.state.name, "assignor": desc.partition_assignor,
            "members": len(desc.members), "sizes": sizes}


def committed(bootstrap: str, group: str, topic: str, partitions: int,
              timeout_s: float = 10.0) -> list[int]:
    """The group's committed offsets of ``topic``'s partitions (-1001: none), through
    OffsetFetch from a consumer that does not join."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)],
                          timeout=timeout_s)
        return [tp.offset for tp in tps]
    finally:
        c.close()


# ---- confluent-kafka ----

def confluent_produce(bootstrap: str, topic: str, recs: list[Rec], *, compression: str = "none",
                      timeout_s: float = OP_TIMEOUT_S, **conf) -> list[tuple[int, int]]:
    """Produce ``recs`` in order (one in flight, so offsets follow the list); returns the
    ``(partition, offset)`` of each delivery report. A delivery error raises."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": compression,
                  "linger.ms": 5, "max.in.flight.requests.per.connection": 1,
                  "message.timeout.ms": int(timeout_s * 1000), **conf})
    reports: list = [None] * len(recs)
    errors: list = []

    def on_delivery(i):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            reports[i] = (msg.partition(), msg.offset())
        return cb

    for i, r in enumerate(recs):
        kwargs = {}
        if r.timestamp_ms is not None:
            kwargs["timestamp"] = r.timestamp_ms
        p.produce(topic, value=r.value, key=r.key, headers=list(r.headers) or None,
                  partition=r.partition, on_delivery=on_delivery(i), **kwargs)
    left = p.flush(timeout_s)
    if left or errors:
        raise RuntimeError(f"confluent-kafka produce to {topic}: {left} not delivered, "
                           f"errors {errors[:3]}")
    return reports


def confluent_consume(bootstrap: str, topic: str, partitions: int = 1, *,
                      isolation: str = "read_uncommitted", timeout_s: float = OP_TIMEOUT_S,
                      start_offset: int | None = None, **conf) -> list[Seen]:
    """Every record of ``topic`` from the beginning (or ``start_offset``) to the end of each
    partition (assigned, no group), in (partition, offset) order; ``conf`` adds consumer
    settings."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": isolation, "fetch.wait.max.ms": 50, **conf})
    seen: list[Seen] = []
    start = OFFSET_BEGINNING if start_offset is None else start_offset
    try:
        c.assign([TopicPartition(topic, p, start) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = _deadline(timeout_s)
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"confluent-kafka consume {topic}: partitions at end "
                                   f"{sorted(at_end)} after {timeout_s} s, {len(seen)} records")
            msg = c.poll(min(0.5, _left(deadline)))
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                raise RuntimeError(f"confluent-kafka consume {topic}: {msg.error()}")
            at_end.discard(msg.partition())
            seen.append(Seen(msg.partition(), msg.offset(), msg.key(), msg.value(),
                             _headers(msg.headers())))
    finally:
        c.close()
    return sorted(seen)


# ---- kafka-python ----

def kafka_python_produce(bootstrap: str, topic: str, recs: list[Rec], *,
                         compression: str = "none", timeout_s: float = OP_TIMEOUT_S,
                         **conf) -> list[tuple[int, int]]:
    """Produce ``recs`` with kafka-python's KafkaProducer (one in flight); returns
    ``(partition, offset)`` per record."""
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap,
                      compression_type=None if compression == "none" else compression,
                      max_in_flight_requests_per_connection=1, linger_ms=5,
                      request_timeout_ms=int(timeout_s * 1000), **conf)
    try:
        futures = []
        for r in recs:
            futures.append(p.send(topic, value=r.value, key=r.key, headers=list(r.headers),
                                  partition=r.partition, timestamp_ms=r.timestamp_ms))
        p.flush(timeout=timeout_s)
        out = []
        for f in futures:
            md = f.get(timeout=timeout_s)
            out.append((md.partition, md.offset))
        return out
    finally:
        p.close(timeout=5)


def kafka_python_consume(bootstrap: str, topic: str, partitions: int = 1, *,
                         isolation: str = "read_uncommitted", timeout_s: float = OP_TIMEOUT_S,
                         start_offset: int | None = None, **conf) -> list[Seen]:
    """Every record of ``topic`` from the beginning (or ``start_offset``) up to each
    partition's end offset with kafka-python's KafkaConsumer (assigned, no group)."""
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      isolation_level=isolation, fetch_max_wait_ms=50,
                      request_timeout_ms=int(timeout_s * 1000) + 1000, **conf)
    seen: list[Seen] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        if start_offset is None:
            c.seek_to_beginning(*tps)
        else:
            for tp in tps:
                c.seek(tp, start_offset)
        ends = c.end_offsets(tps)  # the LSO under read_committed, the high watermark otherwise
        deadline = _deadline(timeout_s)
        while any(c.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka-python consume {topic}: short of {ends} after "
                                   f"{timeout_s} s, {len(seen)} records")
            for tp, msgs in c.poll(timeout_ms=200).items():
                for m in msgs:
                    seen.append(Seen(m.partition, m.offset, m.key, m.value, _headers(m.headers)))
    finally:
        c.close()
    return sorted(seen)


# ---- aiokafka ----

def aiokafka_produce(bootstrap: str, topic: str, recs: list[Rec], *, compression: str = "none",
                     timeout_s: float = OP_TIMEOUT_S, **conf) -> list[tuple[int, int]]:
    """Produce ``recs`` with aiokafka's AIOKafkaProducer, one at a time; ``(partition,
    offset)`` per record."""
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap,
                             compression_type=None if compression == "none" else compression,
                             request_timeout_ms=int(timeout_s * 1000), **conf)
        await asyncio.wait_for(p.start(), timeout_s)
        try:
            out = []
            for r in recs:
                md = await asyncio.wait_for(
                    p.send_and_wait(topic, value=r.value, key=r.key, headers=list(r.headers),
                                    partition=r.partition, timestamp_ms=r.timestamp_ms),
                    timeout_s)
                out.append((md.partition, md.offset))
            return out
        finally:
            await asyncio.wait_for(p.stop(), timeout_s)

    return asyncio.run(run())


def aiokafka_consume(bootstrap: str, topic: str, partitions: int = 1, *,
                     isolation: str = "read_uncommitted", timeout_s: float = OP_TIMEOUT_S,
                     start_offset: int | None = None, **conf) -> list[Seen]:
    """Every record of ``topic`` from the beginning (or ``start_offset``) up to each
    partition's end offset with aiokafka (assigned)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             isolation_level=isolation, fetch_max_wait_ms=50,
                             request_timeout_ms=int(timeout_s * 1000), **conf)
        await asyncio.wait_for(c.start(), timeout_s)
        seen: list[Seen] = []
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            c.assign(tps)
            if start_offset is None:
                await c.seek_to_beginning(*tps)
            else:
                for tp in tps:
                    c.seek(tp, start_offset)
            ends = await asyncio.wait_for(c.end_offsets(tps), timeout_s)
            deadline = _deadline(timeout_s)
            while True:
                positions = [await c.position(tp) for tp in tps]
                if all(pos >= ends[tp] for pos, tp in zip(positions, tps)):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"aiokafka consume {topic}: short of {ends} after "
                                       f"{timeout_s} s, {len(seen)} records")
                batch = await c.getmany(timeout_ms=200)
                for tp, msgs in batch.items():
                    for m in msgs:
                        seen.append(Seen(m.partition, m.offset, m.key, m.value,
                                         _headers(m.headers)))
        finally:
            await asyncio.wait_for(c.stop(), timeout_s)
        return sorted(seen)

    return asyncio.run(run())


# ---- kcat ----

def kcat_produce(bootstrap: str, topic: str, recs: list[Rec], *, compression: str = "none",
                 timeout_s: float = OP_TIMEOUT_S) -> None:
    """Produce ``recs`` with kcat (``-P``), one record per line: ``key<TAB>value``, empty
    key or value sent as null (``-Z``), headers with ``-H`` (kcat puts the same ``-H``
    headers on every record of a run, so one run per distinct header set, in order). Text
    keys and values only (no tab or newline)."""
    runs: list[tuple[tuple, list[Rec]]] = []
    for r in recs:
        if runs and runs[-1][0] == (r.headers, r.partition):
            runs[-1][1].append(r)
        else:
            runs.append(((r.headers, r.partition), [r]))
    deadline = _deadline(timeout_s)
    for (headers, partition), group in runs:
        lines = []
        for r in group:
            for part in (r.key, r.value):
                if part is not None and (not part or b"\t" in part or b"\n" in part):
                    raise ValueError(f"kcat cannot send {part!r} as written: {r}")
            lines.append((r.key or b"") + b"\t" + (r.value or b""))
        cmd = [KCAT, "-P", "-b", bootstrap, "-t", topic, "-p", str(partition), "-K", "\t",
               "-Z", "-z", compression, "-X", "max.in.flight.requests.per.connection=1"]
        for name, value in headers:
            cmd += ["-H", f"{name}={value.decode()}"]
        done = subprocess.run(cmd, input=b"\n".join(lines) + b"\n", capture_output=True,
                              timeout=max(1.0, _left(deadline)), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"kcat -P failed ({done.returncode}): {done.stderr.decode()}")


def kcat_consume(bootstrap: str, topic: str, partitions: int = 1, *,
                 timeout_s: float = OP_TIMEOUT_S, start_offset: int | None = None,
                 **conf) -> list[Seen]:
    """Every record of ``topic`` with ``kcat -C -o beginning -e -J`` (exits at the end);
    ``start_offset`` for ``-o N``, ``conf`` as ``-X name=value``."""
    start = "beginning" if start_offset is None else str(start_offset)
    cmd = [KCAT, "-C", "-b", bootstrap, "-t", topic, "-o", start, "-e", "-J", "-q",
           "-X", "fetch.wait.max.ms=50"]
    for name, value in conf.items():
        cmd += ["-X", f"{name}={value}"]
    done = subprocess.run(cmd, capture_output=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"kcat -C failed ({done.returncode}): {done.stderr.decode()}")
    seen = []
    for line in done.stdout.decode().splitlines():
        m = json.loads(line)
        flat = m.get("headers") or []
        headers = tuple((flat[i], flat[i + 1].encode() if flat[i + 1] is not None else None)
                        for i in range(0, len(flat), 2))
        key = m["key"].encode() if m["key"] is not None else None
        value = m["payload"].encode() if m["payload"] is not None else None
        seen.append(Seen(m["partition"], m["offset"], key, value, headers))
    return sorted(seen)


# ---- raw Fetch: the batches as the broker stores them ----

#: Kafka's codec ids (the low three bits of a batch's attributes).
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def fetch_batches(bootstrap: str, topic: str, partition: int = 0, *,
                  timeout_s: float = 10.0) -> list[tuple[int, int, str]]:
    """``(base_offset, last_offset, codec)`` of every record batch of a partition, from one
    Fetch v4 request written by hand (no client decompresses anything on the way): what the
    broker keeps and serves, byte for byte as the producer built it."""
    name = topic.encode()
    # replica id, max wait, min bytes, max bytes, isolation level
    body = struct.pack(">iiiib", -1, 0, 0, 64 << 20, 0)
    body += struct.pack(">ih", 1, len(name)) + name           # one topic
    body += struct.pack(">iiqi", 1, partition, 0, 64 << 20)  # one partition from offset 0
    client_id = b"seglog-clients-test"
    header = struct.pack(">hhih", 1, 4, 1, len(client_id)) + client_id
    frame = header + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        data = _recv_exactly(sock, size)
    pos = 4 + 4  # correlation id, throttle time
    (n_topics,) = struct.unpack_from(">i", data, pos)
    if n_topics != 1:
        raise RuntimeError(f"Fetch v4 of {topic}-{partition}: {n_topics} topics answered")
    (name_len,) = struct.unpack_from(">h", data, pos + 4)
    pos += 6 + name_len + 4  # topic name, partition count (one)
    _part, error, _hw, _lso = struct.unpack_from(">ihqq", data, pos)
    pos += 22
    if error:
        raise RuntimeError(f"Fetch v4 of {topic}-{partition}: error code {error}")
    (n_aborted,) = struct.unpack_from(">i", data, pos)
    pos += 4 + max(n_aborted, 0) * 16
    (records_len,) = struct.unpack_from(">i", data, pos)
    pos += 4
    end = pos + max(records_len, 0)
    out = []
    while pos + 61 <= end:
        base_offset, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > end:
            break  # a partial batch at the end of the response
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((base_offset, base_offset + last_delta, CODEC_NAMES.get(attributes & 7, "?")))
        pos += 12 + length
    return out


def _recv_exactly(sock, count: int) -> bytes:
    chunks = []
    while count:
        chunk = sock.recv(count)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


# ---- subprocess members (a group member is a process so that it can be killed) ----

class Member:
    """A group member in its own process (``clients_member.py``): confluent-kafka by default.
    Its JSON lines (``assigned``, ``handled``, ...) arrive on :meth:`next_event`."""

    def __init__(self, bootstrap: str, *args: str, env: dict | None = None):
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "clients_member.py"), bootstrap, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})})
        self.events: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.assigned: list | None = None  # the partitions of the last assignment
        self.assigned_pairs: list | None = None  # its "topic:partition" (confluent-kafka)
        self.assignments = 0  # how many assignments it reported

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.events.put(json.loads(line))
            except ValueError:
                self.events.put({"event": "garbage", "line": line})
        self.events.put({"event": "exit"})

    def next_event(self, timeout_s: float) -> dict:
        """The next JSON line, or TimeoutError."""
        try:
            ev = self.events.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError(f"member {self.proc.pid}: nothing in {timeout_s} s; "
                               f"stderr: {self.stderr_tail()}") from None
        if ev.get("event") == "assigned":
            self.assigned = ev["partitions"]
            self.assigned_pairs = ev.get("pairs")
            self.assignments += 1
        return ev

    def drain(self) -> None:
        """Take the events already there (keeps :attr:`assigned` current)."""
        while True:
            try:
                self.next_event(0)
            except TimeoutError:
                return

    def send(self, command: str) -> None:
        """A command line on the member's stdin (``close``)."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, the broker must notice the session expire."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def wait(self, timeout_s: float) -> int:
        """Wait for the process to exit; its exit code."""
        return self.proc.wait(timeout=timeout_s)

    def stderr_tail(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        return (self.proc.stderr.read() or "")[-2000:]

    def stop(self) -> None:
        """End the process if it still runs (kill after a grace period)."""
        if self.proc.poll() is None:
            try:
                self.send("close")
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=10)


def wait_assignments(members: list[Member], want_sizes: list[int], timeout_s: float) -> list[int]:
    """Poll members' events until their assignment sizes (sorted) are ``want_sizes``;
    returns the sizes (raises TimeoutError with what they were)."""
    deadline = _deadline(timeout_s)
    while True:
        for m in members:
            m.drain()
        sizes = sorted(len(m.assigned) if m.assigned is not None else -1 for m in members)
        if sizes == sorted(want_sizes):
            return sizes
        if time.monotonic() > deadline:
            raise TimeoutError(f"assignment sizes {sizes}, wanted {sorted(want_sizes)} "
                               f"after {timeout_s} s")
        time.sleep(0.05)
