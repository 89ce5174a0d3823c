"""Differential: the same ShareFetch (78) / ShareAcknowledge (79) requests (kio over a socket)
to Kafka 4.4 and to seglog serve, and the same answers (error codes, acquired ranges with
their delivery counts, acknowledgement outcomes, the acquisition lock timeout).

Errors: a null group id, an empty or too long member id, a session that does not exist (epoch
1 and -1), acknowledgements in an initial request, a renew-only v2 fetch with limits, an
unknown topic id (initial and subsequent), ShareAcknowledge with epoch 0, a wrong epoch, an
unknown topic id, and a closed session.

A member's sequence (it joins with ShareGroupHeartbeat first): records acquired with delivery
count 1, acknowledged per offset (ACCEPT, RELEASE, REJECT), the released one delivered again
with count 2, its lock renewed (a v2 renew-only ShareFetch), a piggy-backed ACCEPT, acknowledging a record not acquired
(INVALID_RECORD_STATE), a malformed batch (INVALID_REQUEST), closing with epoch -1.

Kafka answers an empty partition of a full fetch or not at all depending on whether its share
partition finished loading (an asynchronous read); the comparison keeps the partitions with
records or an error.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import sys
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.serial import entity_reader, entity_writer

from seglog.bench.kafka import KafkaBroker
from seglog.schemas import load_request_schema, load_response_schema
from seglog.server.broker import Broker

from kafka_waits import eventually

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

WAIT_S = 30.0
ZERO = datetime.timedelta(0)


class Client:
    """One connection; ``call(api_key, version, **fields)`` returns kio's response;
    ``m(api_key, version)`` is the request's module (its nested classes)."""

    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation_id = 0

    @staticmethod
    def m(api_key: int, version: int):
        return sys.modules[load_request_schema(api_key, version).__module__]

    def call(self, api_key: int, version: int, **fields):
        request_class = load_request_schema(api_key, version)
        header_class = request_class.__header_schema__
        self.correlation_id += 1
        header = {"request_api_key": api_key, "request_api_version": version,
                  "correlation_id": self.correlation_id}
        if "client_id" in header_class.__dataclass_fields__:
            header["client_id"] = "differential"
        buffer = io.BytesIO()
        entity_writer(header_class)(buffer, header_class(**header))
        entity_writer(request_class)(buffer, request_class(**fields))
        body = buffer.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", self._read(4))
        data = self._read(size)
        response_class = load_response_schema(api_key, version)
        _, offset = entity_reader(response_class.__header_schema__)(data, 0)
        value, _ = entity_reader(response_class)(data, offset)
        return value

    def _read(self, count: int) -> bytes:
        out = b""
        while len(out) < count:
            chunk = self.sock.recv(count - len(out))
            assert chunk, "the broker closed the connection"
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


def _topic_id(c: "Client", name: str) -> uuid.UUID:
    """The topic's id (Metadata v12), once the broker knows it and leads its partition 0
    (ListOffsets answers: Kafka's broker shows a new topic in its metadata cache a moment
    before its replica manager makes the partition); bounded."""
    m, lo = c.m(3, 12), c.m(2, 7)

    def found() -> uuid.UUID | None:
        r = c.call(3, 12, topics=(m.MetadataRequestTopic(topic_id=None, name=name),),
                   allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        known = [t for t in r.topics if t.name == name and int(t.error_code) == 0]
        if not known or known[0].topic_id is None or known[0].topic_id.int == 0:
            return None
        r = c.call(2, 7, replica_id=-1, isolation_level=0, topics=(lo.ListOffsetsTopic(
            name=name, partitions=(lo.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
        return known[0].topic_id if int(r.topics[0].partitions[0].error_code) == 0 else None

    topic_id = eventually(found, lambda tid: tid is not None, timeout_s=WAIT_S)
    assert topic_id is not None, f"topic {name} never appeared"
    return topic_id


class Share:
    """ShareFetch / ShareAcknowledge of one member over one connection."""

    def __init__(self, c: Client, group: str, member: str, version: int = 2):
        self.c = c
        self.group = group
        self.member = member
        self.version = version
        self.fm = c.m(78, version)
        self.am = c.m(79, version)

    def fetch(self, epoch: int, parts=(), *, acks=None, forget=(), max_wait_ms: int = 0,
              max_records: int = 500, renew: bool = False, max_bytes: int = 2**20,
              group: str | None = "", member: str | None = None, acquire_mode: int = 0):
        m = self.fm
        acks = acks or {}
        topics: dict = {}
        for topic_id, index in parts:
            topics.setdefault(topic_id, []).append(index)
        for topic_id, index in acks:
            topics.setdefault(topic_id, [])
            if index not in topics[topic_id]:
                topics[topic_id].append(index)
        fields = dict(
            group_id=self.group if group == "" else group,
            member_id=self.member if member is None else member,
            share_session_epoch=epoch, max_wait=datetime.timedelta(milliseconds=max_wait_ms),
            min_bytes=1 if not renew else 0, max_bytes=max_bytes,
            max_records=max_records if not renew else 0, batch_size=500,
            topics=tuple(m.FetchTopic(topic_id=t, partitions=tuple(
                m.FetchPartition(partition_index=i, acknowledgement_batches=tuple(
                    m.AcknowledgementBatch(first_offset=f, last_offset=la,
                                           acknowledge_types=tuple(ty))
                    for f, la, ty in acks.get((t, i), ())))
                for i in indexes)) for t, indexes in topics.items()),
            forgotten_topics_data=tuple(m.ForgottenTopic(topic_id=t, partitions=(i,))
                                        for t, i in forget))
        if self.version >= 2:
            fields["is_renew_ack"] = renew
            fields["share_acquire_mode"] = acquire_mode
        return self.c.call(78, self.version, **fields)

    def ack(self, epoch: int, acks: dict, *, member: str | None = None):
        m = self.am
        topics: dict = {}
        for (topic_id, index), batches in acks.items():
            topics.setdefault(topic_id, []).append((index, batches))
        fields = dict(group_id=self.group, member_id=self.member if member is None else member,
                      share_session_epoch=epoch,
                      topics=tuple(m.AcknowledgeTopic(topic_id=t, partitions=tuple(
                          m.AcknowledgePartition(partition_index=i, acknowledgement_batches=tuple(
                              m.AcknowledgementBatch(first_offset=f, last_offset=la,
                                                     acknowledge_types=tuple(ty))
                              for f, la, ty in batches))
                          for i, batches in parts)) for t, parts in topics.items()))
        if self.version >= 2:
            fields["is_renew_ack"] = False
        return self.c.call(79, self.version, **fields)


def fetch_view(r, ids: dict) -> tuple:
    """What is compared of a ShareFetch answer: the top-level error, the lock timeout, and
    the partitions with records or an error (topic ids named by ``ids``)."""
    parts = []
    for t in r.responses:
        for p in t.partitions:
            acquired = [(a.first_offset, a.last_offset, a.delivery_count)
                        for a in p.acquired_records]
            if acquired or p.error_code or p.acknowledge_error_code:
                parts.append((ids.get(t.topic_id, "?"), p.partition_index, int(p.error_code),
                              int(p.acknowledge_error_code), acquired))
    lock_ms = int(r.acquisition_lock_timeout.total_seconds() * 1000)
    return int(r.error_code), lock_ms, sorted(parts)


def ack_view(r, ids: dict) -> tuple:
    lock_ms = int(r.acquisition_lock_timeout.total_seconds() * 1000) \
        if hasattr(r, "acquisition_lock_timeout") else None
    return int(r.error_code), lock_ms, sorted(
        (ids.get(t.topic_id, "?"), p.partition_index, int(p.error_code))
        for t in r.responses for p in t.partitions)


def errors_scenario(bootstrap: str) -> list:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("e", 1, 1)])["e"].result(30)
    c = Client(bootstrap)
    tid = _topic_id(c, "e")
    ghost = uuid.UUID(int=12345)
    ids = {tid: "e", ghost: "ghost"}
    s = Share(c, "g-errors", str(uuid.uuid4()))
    out: list = []
    out.append(fetch_view(s.fetch(0, [(tid, 0)], group=None), ids))
    out.append(fetch_view(s.fetch(0, [(tid, 0)], member=""), ids))
    out.append(fetch_view(s.fetch(0, [(tid, 0)], member="x" * 37), ids))
    out.append(fetch_view(s.fetch(1, [(tid, 0)]), ids))
    out.append(fetch_view(s.fetch(-1), ids))
    out.append(fetch_view(s.fetch(0, acks={(tid, 0): [(0, 0, [1])]}), ids))
    out.append(fetch_view(s.fetch(0, renew=True, max_bytes=100), ids))
    out.append(ack_view(s.ack(0, {}), ids))
    out.append(ack_view(s.ack(1, {}), ids))
    out.append(fetch_view(s.fetch(0, [(ghost, 0)]), ids))
    out.append(fetch_view(s.fetch(1), ids))
    out.append(ack_view(s.ack(5, {}), ids))
    out.append(ack_view(s.ack(2, {(ghost, 0): [(0, 0, [1])]}), ids))
    out.append(ack_view(s.ack(-1, {}), ids))
    out.append(fetch_view(s.fetch(3), ids))
    out.append(fetch_view(s.fetch(0, [(tid, 0)], acquire_mode=7), ids))
    c.close()
    return out


def _join(c: Client, group: str, member: str, topic: str, tid: uuid.UUID) -> int:
    """ShareGroupHeartbeat until the member is assigned ``topic``'s partition 0; its epoch."""
    deadline = time.monotonic() + WAIT_S
    epoch = 0
    while True:
        r = c.call(76, 1, group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
                   subscribed_topic_names=(topic,) if epoch == 0 else None)
        if int(r.error_code) in (14, 15, 16):  # the offsets topic is being made / loaded
            c.call(10, 4, key_type=0, coordinator_keys=(group,))
            assert time.monotonic() < deadline, "no coordinator"
            time.sleep(0.2)
            continue
        assert int(r.error_code) == 0, r
        epoch = r.member_epoch
        if r.assignment is not None and any(
                t.topic_id == tid and 0 in t.partitions
                for t in r.assignment.topic_partitions):
            return epoch
        assert time.monotonic() < deadline, "never assigned"
        time.sleep(0.2)


def _fetch_until(s: Share, epoch: int, ids: dict) -> tuple[int, tuple]:
    """Fetch (epoch, epoch + 1, ...) until records are acquired; ``(next epoch, view)``."""
    deadline = time.monotonic() + WAIT_S
    while True:
        view = fetch_view(s.fetch(epoch, max_wait_ms=500), ids)
        epoch += 1
        if view[2] or time.monotonic() > deadline:
            return epoch, view


def sequence_scenario(bootstrap: str) -> list:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("sq", 1, 1)])["sq"].result(30)
    c = Client(bootstrap)
    tid = _topic_id(c, "sq")
    ids = {tid: "sq"}
    member = str(uuid.uuid4())
    _join(c, "g-seq", member, "sq", tid)
    s = Share(c, "g-seq", member)
    out: list = []
    first = s.fetch(0, [(tid, 0)], max_wait_ms=200)
    out.append(int(first.error_code))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(5):
        producer.produce("sq", value=b"v%d" % i, partition=0)
    producer.flush(30)
    epoch, view = _fetch_until(s, 1, ids)
    out.append(view)
    acks = {(tid, 0): [(0, 4, [1, 1, 2, 3, 1])]}
    out.append(ack_view(s.ack(epoch, acks), ids))
    epoch += 1
    epoch, view = _fetch_until(s, epoch, ids)
    out.append(view)  # offset 2 again, delivery count 2
    # v2 renew (KIP-1222): the lock of offset 2 renewed, nothing fetched.
    out.append(fetch_view(s.fetch(epoch, acks={(tid, 0): [(2, 2, [4])]}, renew=True,
                                  max_bytes=0), ids))
    epoch += 1
    out.append(fetch_view(s.fetch(epoch, acks={(tid, 0): [(2, 2, [1])]}, max_wait_ms=200),
                          ids))
    epoch += 1
    out.append(ack_view(s.ack(epoch, {(tid, 0): [(3, 3, [1])]}), ids))  # not acquired
    epoch += 1
    out.append(ack_view(s.ack(epoch, {(tid, 0): [(4, 3, [1])]}), ids))  # first > last
    epoch += 1
    out.append(ack_view(s.ack(-1, {}), ids))
    out.append(fetch_view(s.fetch(epoch), ids))
    c.call(76, 1, group_id="g-seq", member_id=member, member_epoch=-1, rack_id=None,
           subscribed_topic_names=None)
    c.close()
    return out


def _compare(kafka_ref, tmp_path, scenario) -> None:
    kafka = KafkaBroker(kafka_ref, tmp_path / "kafka", extra_properties={
        "share.coordinator.state.topic.min.isr": 1,
        "group.share.heartbeat.interval.ms": 5000})
    kafka.format()
    kafka.start()
    try:
        expected = scenario(kafka.bootstrap)
    finally:
        kafka.stop()
    broker = Broker(tmp_path / "seglog", listen=("127.0.0.1", 0),
                    config={"offsets.topic.num.partitions": 1})
    broker.start()
    try:
        got = scenario(broker.bootstrap)
    finally:
        broker.stop()
    for index, (want, have) in enumerate(zip(expected, got)):
        assert have == want, f"step {index}"
    assert len(got) == len(expected)


def test_share_fetch_errors_answer_as_kafka_does(kafka_ref, tmp_path):
    _compare(kafka_ref, tmp_path, errors_scenario)


def test_a_share_fetch_sequence_answers_as_kafka_does(kafka_ref, tmp_path):
    _compare(kafka_ref, tmp_path, sequence_scenario)
