"""The Produce handler's short path for the common request (one topic, one partition, no
transactional id, acks 1 or -1, no authorizer and no quota: ``data_produce._short_path``, read
by the backend's ``wire.read_produce_single`` and answered by its ``encode_produce_single``)
against the general one (``handle_produce``): the same request bytes, in the same order, sent
to two brokers over real Stores, one through the broker's entry point
(``handle_produce_body``, which takes the short path when it may) and one through
``handle_produce`` alone, answer byte-identical responses and leave byte-identical log files,
on both storage backends. A third broker checks which requests the short path takes, so that
the comparison cannot pass with the short path never taken."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
import uuid
from pathlib import Path

from kio.serial import entity_reader, entity_writer

from seglog.schemas import load_request_schema, load_response_schema
from seglog.server.apis import data, data_produce
from seglog.server.apis.data_metadata import build
from seglog.server.apis.data_topics import to_uuid
from seglog.server.context import AppendNotifier, BrokerState, RequestContext
from seglog.store import Store

WAIT_S = 20.0  # bound on the whole exchange
UNKNOWN_ID = uuid.UUID(int=12345)


def _module(cls):
    return __import__(cls.__module__, fromlist=["_"])


class _Broker:
    """A BrokerState over a real Store (as tests/server/test_data_handlers.py's Harness)."""

    def __init__(self, path: Path, backend: str):
        self.store = Store(path, backend=backend, offsets_topic_partitions=1)
        self.state: BrokerState | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.state = BrokerState(store=self.store, config={}, node_id=7, cluster_id="c",
                                 host="127.0.0.1", port=19092, loop=loop,
                                 appended=AppendNotifier(loop))
        await data.start(self.state)

    def ctx(self, version: int, client_id: str = "test-client") -> RequestContext:
        return RequestContext(0, version, 1, client_id, 1, "127.0.0.1", 5555, self.state)

    def setup(self) -> uuid.UUID:
        topic = self.store.create_topic("t", partitions=2)
        self.store.create_topic("small", partitions=1, config={"max.message.bytes": "100"})
        self.store.create_topic("compacted", partitions=1,
                                config={"cleanup.policy": "compact"})
        self.store.producer(transactional_id="tx").init_transactions()  # __transaction_state
        return to_uuid(topic.topic_id)


def _body(version: int, topics, *, acks: int = -1, transactional_id: str | None = None
          ) -> bytes:
    """A Produce request body (kio's writer): ``topics`` is [(name or uuid, [(partition,
    records)])]."""
    cls = load_request_schema(0, version)
    mod = _module(cls)
    topic_data = tuple(
        build(mod.TopicProduceData,
              **({"topic_id": key} if version >= 13 else {"name": key}),
              partition_data=tuple(build(mod.PartitionProduceData, index=p, records=r)
                                   for p, r in parts))
        for key, parts in topics)
    request = build(cls, transactional_id=transactional_id, acks=acks,
                    timeout=datetime.timedelta(seconds=5), topic_data=topic_data)
    out = io.BytesIO()
    entity_writer(cls)(out, request)
    return out.getvalue()


def _requests(be, producer: tuple[int, int]):
    """``(version, topics, request arguments, takes the short path)`` in order: the common
    requests, and every kind the short path must leave to the general one. A topic named
    ``ID`` is topic ``t`` by its id (each broker's own)."""
    pid, epoch = producer

    def batch(values, **kwargs):
        return bytes(be.encode_batch(list(values), kwargs.pop("keys", None), None, None,
                                     base_offset=0, **kwargs))

    def idempotent(seq, n=2):
        return batch([b"i%d" % i for i in range(n)], producer_id=pid, producer_epoch=epoch,
                     base_sequence=seq)

    plain = batch([b"a", b"b", b"c"])
    corrupt = bytearray(plain)
    corrupt[-1] ^= 0xFF
    stamped = bytearray(plain)
    struct.pack_into(">i", stamped, 12, 7)  # a partition leader epoch other than the leader's
    transactional = batch([b"t"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                          is_transactional=True)
    out = []
    for version in (3, 5, 7, 8, 9, 11, 12):
        out.append((version, [("t", [(0, plain)])], {}, True))
        out.append((version, [("t", [(1, plain)])], {"acks": 1}, True))
    out += [
        (13, [("ID", [(0, plain)])], {}, True),
        (9, [("t", [(0, bytes(stamped))])], {}, True),
        (9, [("t", [(0, idempotent(0))])], {}, True),
        (9, [("t", [(0, idempotent(0))])], {}, True),  # a retry: the first offsets
        (9, [("t", [(0, idempotent(2))])], {}, True),
        (9, [("t", [(0, idempotent(9))])], {}, True),  # a gap: OUT_OF_ORDER_SEQUENCE
        (9, [("t", [(0, bytes(corrupt))])], {}, True),  # CORRUPT_MESSAGE from the Log
        (9, [("small", [(0, batch([b"y" * 200]))])], {}, True),  # MESSAGE_TOO_LARGE
        (9, [("compacted", [(0, plain)])], {}, True),  # INVALID_RECORD, with indexes
        (9, [("compacted", [(0, batch([b"k"], keys=[b"key"]))])], {}, True),
        (9, [("__transaction_state", [(0, plain)])], {}, True),  # internal topic
        # The general path's requests.
        (9, [("t", [(0, plain)])], {"acks": 0}, False),
        (9, [("t", [(0, plain)])], {"acks": 2}, False),
        (9, [("t", [(0, plain), (1, plain)])], {}, False),
        (9, [("t", [(0, plain)]), ("small", [(0, plain)])], {}, False),
        (9, [("nope", [(0, plain)])], {}, False),
        (9, [("t", [(5, plain)])], {}, False),
        (13, [(UNKNOWN_ID, [(0, plain)])], {}, False),
        (9, [("t", [(0, plain + plain)])], {}, False),  # two batches
        (9, [("t", [(0, plain[:30])])], {}, False),
        (9, [("t", [(0, transactional)])], {}, False),  # no transactional id
        (9, [("t", [(0, plain)])], {"transactional_id": "tx"}, False),
    ]
    return out


def _files(root: Path) -> dict[str, bytes]:
    """The segment files of the produced-to topics (the internal ones hold each store's own
    coordinator records, timestamped when each store made them)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.log"))
            if not p.parent.name.startswith("__")}


def test_short_path_answers_and_writes_as_the_general_one(tmp_path, backend):
    brokers = [_Broker(tmp_path / name, backend.name) for name in ("short", "long", "probe")]
    short, general, probe = brokers
    topic_ids = [b.setup() for b in brokers]
    pids = [b.store.init_producer_id() for b in brokers]
    assert len(set(pids)) == 1  # fresh stores: the same producer id, so the same batches fit
    requests = _requests(backend, pids[0])

    def body_for(index, version, topics, kwargs):
        named = [(topic_ids[index] if key == "ID" else key, parts) for key, parts in topics]
        return memoryview(_body(version, named, **kwargs))

    def comparable(index, raw):
        if raw is None or isinstance(raw, str):
            return raw
        # A v13 answer names the topic by this broker's own id: compared without it.
        return b"".join(bytes(p) for p in raw.parts).replace(
            topic_ids[index].bytes, bytes(16)), raw.throttle_time_ms

    async def main():
        for b in brokers:
            await b.start()
        answers, taken = [], []
        for version, topics, kwargs, expected in requests:
            outcome = []
            for index, b in ((0, short), (1, general)):
                view = body_for(index, version, topics, kwargs)
                try:
                    if b is short:
                        raw = await data_produce.handle_produce_body(b.ctx(version), view)
                    else:
                        raw = await data_produce.handle_produce(
                            b.ctx(version), data_produce.read_produce_request(version, view))
                except data_produce.ProduceFailedWithoutAck:
                    raw = "closed"
                outcome.append(comparable(index, raw))
            answers.append((version, topics, outcome[0], outcome[1]))
            probe_body = body_for(2, version, topics, kwargs)
            request = data_produce.read_produce_request(version, probe_body)
            took = data_produce._short_path(probe.ctx(version), probe_body) is not None
            if not took:
                try:
                    await data_produce.handle_produce(probe.ctx(version), request)
                except data_produce.ProduceFailedWithoutAck:
                    pass
            taken.append((took, expected))
        return answers, taken

    answers, taken = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    for b in brokers:
        b.store.close()
    for version, topics, short_answer, general_answer in answers:
        assert short_answer == general_answer, (version, [key for key, _ in topics])
    assert [took for took, _ in taken] == [expected for _, expected in taken]
    short_files, general_files = _files(tmp_path / "short"), _files(tmp_path / "long")
    assert short_files.keys() == general_files.keys()
    for name, content in short_files.items():
        assert content == general_files[name], name
    assert sum(len(c) for c in short_files.values()) > 2000


def _first_step(coroutine):
    """The handler's first step, as the connection runs it (``Connection._dispatch``): its
    answer when it finishes without suspending, else the string ``"waits"``."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    return "waits"


def test_acks_all_on_a_lone_broker_is_answered_in_the_first_step(tmp_path, backend):
    """Kafka's first ``DelayedProduce.tryComplete`` (``tryCompleteElseWatch``): an acks=-1
    append whose high watermark already covers it (a lone broker's always does) is answered
    without a wait, on the short path and the general one (two partitions); the records are
    readable at once."""
    broker = _Broker(tmp_path, backend.name)
    broker.setup()
    batch = bytes(backend.encode_batch([b"a", b"b"], None, None, None, base_offset=0))

    async def main():
        await broker.start()
        answers = []
        for topics in ([("t", [(0, batch)])], [("t", [(0, batch), (1, batch)])]):
            body = memoryview(_body(9, topics))
            answers.append(_first_step(data_produce.handle_produce_body(broker.ctx(9), body)))
        return answers

    answers = asyncio.run(asyncio.wait_for(main(), WAIT_S))
    try:
        assert "waits" not in answers
        for raw in answers:
            response = _decode_produce(9, raw)
            partitions = response.responses[0].partition_responses
            assert [int(p.error_code) for p in partitions] == [0] * len(partitions)
        t = broker.store.topic("t")
        assert (t.log(0).high_watermark, t.log(1).high_watermark) == (4, 2)
    finally:
        broker.store.close()


def _decode_produce(version: int, raw):
    """A hand-encoded Produce answer read back with kio's reader."""
    body = b"".join(bytes(part) for part in raw.parts)
    response, consumed = entity_reader(load_response_schema(0, version))(memoryview(body), 0)
    assert consumed == len(body)
    return response
