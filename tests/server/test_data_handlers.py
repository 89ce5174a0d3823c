"""The data APIs' handlers (Metadata, Produce, Fetch, ListOffsets, OffsetForLeaderEpoch) called
directly with kio requests over a real Store, on both storage backends: Kafka's answers for
each rule of :mod:`seglog.server.apis.data` and its modules. Fetch responses, which the
handler encodes by hand, are decoded back with kio's reader for every version."""

from __future__ import annotations

import asyncio
import datetime
import io
import uuid

import pytest
from seglog.schemas import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from seglog import get_backend
from seglog.server.apis import data, data_fetch, data_metadata, data_offsets, data_produce
from seglog.server.apis.data_metadata import build
from seglog.server.apis.data_topics import to_uuid
from seglog.server.context import AppendNotifier, BrokerState, RawResponse, RequestContext
from seglog.store import Store

WAIT_S = 10.0  # bound on every wait in these tests


def _module(cls):
    return __import__(cls.__module__, fromlist=["_"])


def decode(api_key, version, raw):
    """A hand-encoded response body (RawResponse) read back with kio's reader; None stays
    None (no response)."""
    if raw is None:
        return None
    assert isinstance(raw, RawResponse)
    body = b"".join(bytes(part) for part in raw.parts)
    response, consumed = entity_reader(load_response_schema(api_key, version))(
        memoryview(body), 0)
    assert consumed == len(body)
    return response


class Harness:
    """A BrokerState over a real Store, and one call per API."""

    def __init__(self, path, backend, config=None):
        self.store = Store(path, backend=backend, offsets_topic_partitions=1)
        self.be = get_backend(backend)
        self.config = dict(config or {})
        self.loop = None
        self.state = None

    async def start(self):
        self.loop = asyncio.get_running_loop()
        self.state = BrokerState(store=self.store, config=self.config, node_id=7,
                                 cluster_id="cluster-x", host="127.0.0.1", port=19092,
                                 loop=self.loop, appended=AppendNotifier(self.loop))
        await data.start(self.state)

    def ctx(self, key, version, client_id="test-client"):
        return RequestContext(key, version, 1, client_id, 1, "127.0.0.1", 5555, self.state)

    def batch(self, values, **kwargs):
        return self.be.encode_batch(list(values), None, kwargs.pop("timestamps_ms", None), None,
                                    base_offset=0, compression=kwargs.pop("compression", "none"),
                                    **kwargs)

    async def metadata(self, version, topics, *, auto=True, ops=False):
        cls = load_request_schema(3, version)
        mod = _module(cls)
        wanted = None if topics is None else tuple(
            build(mod.MetadataRequestTopic, name=t, topic_id=None)
            if isinstance(t, str) or t is None
            else build(mod.MetadataRequestTopic, name=None, topic_id=t) for t in topics)
        request = build(cls, topics=wanted, allow_auto_topic_creation=auto,
                        include_cluster_authorized_operations=False,
                        include_topic_authorized_operations=ops)
        body = io.BytesIO()  # the handler takes the request's bytes (raw_request)
        entity_writer(cls)(body, request)
        response = await data_metadata.handle_metadata(self.ctx(3, version),
                                                       memoryview(body.getvalue()))
        # A big answer comes encoded (on a worker thread): read it back.
        return decode(3, version, response) if isinstance(response, RawResponse) else response

    async def produce(self, topic, partitions, *, acks=1, version=9, client_id="test-client"):
        cls = load_request_schema(0, version)
        mod = _module(cls)
        key = {"topic_id": topic} if version >= 13 else {"name": topic}
        request = build(cls, transactional_id=None, acks=acks,
                        timeout=datetime.timedelta(seconds=1),
                        topic_data=(build(mod.TopicProduceData, **key, partition_data=tuple(
                            build(mod.PartitionProduceData, index=p, records=r)
                            for p, r in partitions)),))
        return decode(0, version, await data_produce.handle_produce(
            self.ctx(0, version, client_id), request))

    async def fetch(self, version, topics, *, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                    isolation=0, session_epoch=-1, replica_id=-1):
        """``topics``: [(topic name or id, [(partition, offset, partition_max_bytes, epoch)])].
        Returns the decoded kio response."""
        cls = load_request_schema(1, version)
        mod = _module(cls)
        fetch_topics = tuple(
            build(mod.FetchTopic, **({"topic_id": t} if version >= 13 else {"topic": t}),
                  partitions=tuple(build(mod.FetchPartition, partition=p, fetch_offset=o,
                                         partition_max_bytes=m, current_leader_epoch=e,
                                         log_start_offset=-1) for p, o, m, e in parts))
            for t, parts in topics)
        kwargs = {}
        if version >= 15:
            kwargs["replica_state"] = build(mod.ReplicaState, replica_id=replica_id,
                                            replica_epoch=-1)
        request = build(cls, replica_id=replica_id, max_wait=datetime.timedelta(
            milliseconds=max_wait_ms), min_bytes=min_bytes, max_bytes=max_bytes,
            isolation_level=isolation, session_id=0, session_epoch=session_epoch,
            topics=fetch_topics, forgotten_topics_data=(), rack_id="", **kwargs)
        return decode(1, version, await data_fetch.handle_fetch(self.ctx(1, version), request))

    async def list_offsets(self, version, topic, partitions, *, isolation=0, replica_id=-1):
        cls = load_request_schema(2, version)
        mod = _module(cls)
        request = build(cls, replica_id=replica_id, isolation_level=isolation,
                        timeout=datetime.timedelta(seconds=1),
                        topics=(build(mod.ListOffsetsTopic, name=topic, partitions=tuple(
                            build(mod.ListOffsetsPartition, partition_index=p, timestamp=ts,
                                  current_leader_epoch=e, max_num_offsets=1)
                            for p, ts, e in partitions)),))
        response = await data_offsets.handle_list_offsets(self.ctx(2, version), request)
        return response.topics[0].partitions

    async def epochs(self, version, topic, partitions):
        cls = load_request_schema(23, version)
        mod = _module(cls)
        request = build(cls, replica_id=-1, topics=(build(mod.OffsetForLeaderTopic, topic=topic,
                        partitions=tuple(build(mod.OffsetForLeaderPartition, partition=p,
                                               current_leader_epoch=c, leader_epoch=e)
                                         for p, c, e in partitions)),))
        response = await data_offsets.handle_offset_for_leader_epoch(self.ctx(23, version),
                                                                     request)
        return response.topics[0].partitions


@pytest.fixture
def harness(tmp_path, backend):
    h = Harness(tmp_path / "data", backend.name)
    yield h
    h.store.close()


def run(harness, fn):
    async def main():
        await harness.start()
        return await asyncio.wait_for(fn(harness), WAIT_S * 2)
    return asyncio.run(main())


def codes(partitions):
    return [int(p.error_code) for p in partitions]


# --- Metadata -------------------------------------------------------------------------------

def test_metadata_auto_creates_answering_unknown_then_lists_the_partitions(harness):
    harness.config.update({"num.partitions": 3})

    async def body(h):
        first = await h.metadata(12, ["fresh"])
        second = await h.metadata(12, ["fresh"])
        return first, second

    first, second = run(harness, body)
    (topic,) = first.topics
    assert (int(topic.error_code), topic.name, topic.partitions) == (3, "fresh", ())
    (topic,) = second.topics
    assert int(topic.error_code) == 0
    assert topic.topic_id == to_uuid(harness.store.topic("fresh").topic_id)
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes,
             p.offline_replicas) for p in topic.partitions] == [
        (i, 7, 0, (7,), (7,), ()) for i in range(3)]
    assert (second.cluster_id, second.controller_id) == ("cluster-x", 7)
    assert [(b.node_id, b.host, b.port, b.rack) for b in second.brokers] == [
        (7, "127.0.0.1", 19092, None)]


def test_metadata_without_auto_creation_and_invalid_names(harness):
    harness.config.update({"auto.create.topics.enable": False})

    async def body(h):
        off = await h.metadata(9, ["absent", "bad name!"])
        h.config["auto.create.topics.enable"] = True
        refused = await h.metadata(9, ["absent2"], auto=False)
        invalid = await h.metadata(9, ["bad/name"])
        return off, refused, invalid

    off, refused, invalid = run(harness, body)
    assert [(t.name, int(t.error_code)) for t in off.topics] == [("absent", 3), ("bad name!", 17)]
    assert [(t.name, int(t.error_code)) for t in refused.topics] == [("absent2", 3)]
    assert [(t.name, int(t.error_code)) for t in invalid.topics] == [("bad/name", 17)]
    assert harness.store.topics() == []


@pytest.mark.parametrize("topics, partitions_each, refusal", [
    (1, 9999, None),  # 10,000 records: a topic record and 9,999 partition records
    (1, 10000, "Unable to perform excessively large batch operation."),
    (5000, 1, None),
    (5001, 1, "Unable to perform excessively large batch operation."),
    (5000, 2, "Unable to perform excessively large batch operation."),
    (5001, 2, "Excessively large number of partitions per request."),
    (20000, 1, "Excessively large number of partitions per request."),
])
def test_auto_creation_refusal_is_kafkas_controller_bound(topics, partitions_each, refusal):
    assert data_metadata.auto_creation_refusal(topics, partitions_each) == refusal


def test_metadata_auto_creation_over_the_bound_creates_none(harness, caplog):
    harness.config.update({"num.partitions": 2})
    names = [f"t{i}" for i in range(5001)]

    async def body(h):
        refused = await h.metadata(12, names + ["bad name!", "__consumer_offsets"])
        allowed = await h.metadata(12, ["a", "b", "a"])
        return refused, allowed

    refused, allowed = run(harness, body)
    assert [(t.name, int(t.error_code)) for t in refused.topics] == (
        [(n, 3) for n in names] + [("bad name!", 17), ("__consumer_offsets", 3)])
    assert "Excessively large number of partitions per request" in caplog.text
    assert [(t.name, int(t.error_code)) for t in allowed.topics] == [("a", 3), ("b", 3)]
    assert harness.store.topics() == ["a", "b"]


def test_metadata_all_topics_ids_internal_and_authorized_operations(harness):
    harness.store.create_topic("a", partitions=2)
    harness.store.producer(transactional_id="tx").init_transactions()  # __transaction_state
    a_id = to_uuid(harness.store.topic("a").topic_id)
    unknown = uuid.uuid4()

    async def body(h):
        every = await h.metadata(1, None)
        v0 = await h.metadata(0, [])
        by_id = await h.metadata(12, [a_id, unknown], ops=True)
        v10_id = await h.metadata(10, [a_id])
        return every, v0, by_id, v10_id

    every, v0, by_id, v10_id = run(harness, body)
    assert "a" in [t.name for t in every.topics]
    assert [t.name for t in v0.topics] == [t.name for t in every.topics]
    internal = [t.name for t in every.topics if t.is_internal]
    assert internal == ["__transaction_state"]
    found, missing = by_id.topics
    assert (found.name, int(found.error_code), found.topic_authorized_operations) == (
        "a", 0, data_metadata.TOPIC_AUTHORIZED_OPERATIONS)
    assert data_metadata.TOPIC_AUTHORIZED_OPERATIONS == 3576
    assert (missing.name, missing.topic_id, int(missing.error_code)) == (None, unknown, 100)
    assert [int(t.error_code) for t in v10_id.topics] == [42]


# --- Produce --------------------------------------------------------------------------------

def test_produce_appends_and_answers_offsets_and_errors(harness):
    harness.store.create_topic("t", partitions=2)
    good = harness.batch([b"a", b"b", b"c"])

    async def body(h):
        seen = h.state.appended.count
        first = await h.produce("t", [(0, good), (1, good), (2, good)])
        second = await h.produce("t", [(0, good)])
        missing = await h.produce("nope", [(0, good)])
        return seen, h.state.appended.count, first, second, missing

    seen, after, first, second, missing = run(harness, body)
    assert after > seen
    parts = first.responses[0].partition_responses
    assert [(p.index, int(p.error_code), p.base_offset, p.log_start_offset, p.log_append_time)
            for p in parts] == [(0, 0, 0, 0, None), (1, 0, 0, 0, None), (2, 3, -1, -1, None)]
    assert second.responses[0].partition_responses[0].base_offset == 3
    assert codes(missing.responses[0].partition_responses) == [3]
    assert [r.value for r in harness.store.log(("t", 0)).records()] == [b"a", b"b", b"c"] * 2
    # Stamped with the leader epoch as Kafka's leader does (the client wrote -1), CRC intact.
    stored = list(harness.be.iter_batches(harness.store.log(("t", 0)).read(0).buffer))
    assert [b.partition_leader_epoch for b in stored] == [0, 0]
    for b in stored:
        b.ensure_valid()


def test_produce_record_set_rules(harness):
    harness.store.create_topic("t", partitions=1)
    one = harness.batch([b"x"])
    corrupt = bytearray(one)
    corrupt[-1] ^= 0xFF
    zstd = harness.batch([b"z"], compression="zstd")

    async def body(h):
        return [
            await h.produce("t", [(0, one + one)]),  # two batches
            await h.produce("t", [(0, one + one[:20])]),  # a torn tail is ignored
            await h.produce("t", [(0, bytes(corrupt))]),
            await h.produce("t", [(0, one[:30])]),  # no whole batch
            await h.produce("t", [(0, b"")]),
            await h.produce("t", [(0, zstd)], version=6),
            await h.produce("t", [(0, zstd)], version=7),
        ]

    answers = [codes(r.responses[0].partition_responses)[0] for r in run(harness, body)]
    assert answers == [87, 0, 2, 87, 87, 76, 0]
    assert harness.store.log(("t", 0)).end_offset == 2


def test_produce_acks_rules(harness):
    harness.store.create_topic("t", partitions=1)
    harness.store.create_topic("safe", partitions=1, config={"min.insync.replicas": "2"})
    one = harness.batch([b"x"])

    async def body(h):
        bad_acks = await h.produce("t", [(0, one)], acks=2)
        all_isr = await h.produce("safe", [(0, one)], acks=-1)
        leader_only = await h.produce("safe", [(0, one)], acks=1)
        silent = await h.produce("t", [(0, one)], acks=0)
        with pytest.raises(data_produce.ProduceFailedWithoutAck):
            await h.produce("t", [(5, one)], acks=0)
        return bad_acks, all_isr, leader_only, silent

    bad_acks, all_isr, leader_only, silent = run(harness, body)
    assert codes(bad_acks.responses[0].partition_responses) == [21]
    # Kafka checks min(min.insync.replicas, replication factor 1): acks=-1 succeeds (as the
    # real one-node Kafka 4.4 answers).
    (p,) = all_isr.responses[0].partition_responses
    assert (int(p.error_code), p.base_offset, p.log_start_offset) == (0, 0, 0)
    assert codes(leader_only.responses[0].partition_responses) == [0]
    assert silent is None
    assert harness.store.log(("t", 0)).end_offset == 1
    assert harness.store.log(("safe", 0)).end_offset == 2


def test_produce_sizes_internal_topics_and_log_append_time(harness):
    harness.store.create_topic("small", partitions=1, config={"max.message.bytes": "100"})
    harness.store.create_topic("stamped", partitions=1,
                               config={"message.timestamp.type": "LogAppendTime"})
    harness.store.producer(transactional_id="tx").init_transactions()  # __transaction_state
    big = harness.batch([b"y" * 200])

    async def body(h):
        too_large = await h.produce("small", [(0, big)])
        stamped = await h.produce("stamped", [(0, h.batch([b"s"], timestamps_ms=[5]))])
        internal = await h.produce("__transaction_state", [(0, h.batch([b"i"]))])
        # A record the transaction coordinator could not load back: INVALID_RECORD.
        keyed = h.be.encode_batch([b"i"], [b"k"], None, None, base_offset=0)  # compacted
        admin = await h.produce("__transaction_state", [(0, keyed)], client_id="__admin_client")
        return too_large, stamped, internal, admin

    too_large, stamped, internal, admin = run(harness, body)
    (p,) = too_large.responses[0].partition_responses
    assert (int(p.error_code), p.log_start_offset) == (10, -1)
    (p,) = stamped.responses[0].partition_responses
    assert int(p.error_code) == 0 and p.log_append_time is not None
    appended_ms = int(p.log_append_time.timestamp() * 1000)
    (record,) = harness.store.log(("stamped", 0)).records()
    assert record.timestamp_ms == appended_ms
    assert codes(internal.responses[0].partition_responses) == [17]
    assert codes(admin.responses[0].partition_responses) == [87]


def test_produce_idempotent_duplicate_and_out_of_order(harness):
    harness.store.create_topic("t", partitions=1)
    pid, epoch = harness.store.init_producer_id()

    def batch(seq, n=2):
        return harness.batch([b"v%d" % i for i in range(n)], producer_id=pid,
                             producer_epoch=epoch, base_sequence=seq)

    async def body(h):
        first = await h.produce("t", [(0, batch(0))])
        again = await h.produce("t", [(0, batch(0))])
        nxt = await h.produce("t", [(0, batch(2))])
        gap = await h.produce("t", [(0, batch(9))])
        return first, again, nxt, gap

    first, again, nxt, gap = run(harness, body)
    offsets = [(int(r.responses[0].partition_responses[0].error_code),
                r.responses[0].partition_responses[0].base_offset)
               for r in (first, again, nxt, gap)]
    assert offsets == [(0, 0), (0, 0), (0, 2), (45, -1)]
    assert gap.responses[0].partition_responses[0].log_start_offset == 0
    assert harness.store.log(("t", 0)).end_offset == 4


def test_produce_v13_by_topic_id(harness):
    topic = harness.store.create_topic("t", partitions=1)

    async def body(h):
        known = await h.produce(to_uuid(topic.topic_id), [(0, h.batch([b"a"]))], version=13)
        unknown = await h.produce(uuid.uuid4(), [(0, h.batch([b"a"]))], version=13)
        return known, unknown

    known, unknown = run(harness, body)
    assert known.responses[0].topic_id == to_uuid(topic.topic_id)
    assert codes(known.responses[0].partition_responses) == [0]
    assert codes(unknown.responses[0].partition_responses) == [100]


# --- Fetch ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [4, 5, 7, 11, 12, 13, 15, 18])
def test_fetch_every_version_decodes_and_reads_whole_batches(harness, version):
    topic = harness.store.create_topic("t", partitions=1)
    log = topic.log(0)
    log.append_raw(harness.batch([b"a", b"b"]))
    log.append_raw(harness.batch([b"c"]))
    key = to_uuid(topic.topic_id) if version >= 13 else "t"

    async def body(h):
        return await h.fetch(version, [(key, [(0, 1, 1 << 20, -1), (9, 0, 100, -1)])])

    response = run(harness, body)
    (t,) = response.responses
    ok, missing = t.partitions
    assert (ok.partition_index, int(ok.error_code), ok.high_watermark,
            ok.last_stable_offset) == (0, 0, 3, 3)
    batches = list(harness.be.iter_batches(ok.records))
    assert [b.base_offset for b in batches] == [0, 2]  # the batch holding offset 1, whole
    assert (missing.partition_index, int(missing.error_code), missing.high_watermark) == (9, 3, -1)
    assert missing.records in (b"", None)
    if version >= 7:
        assert (int(response.error_code), response.session_id) == (0, 0)


def test_fetch_size_rules_first_batch_then_limits(harness):
    harness.store.create_topic("t", partitions=3)
    for p in range(3):
        log = harness.store.log(("t", p))
        for i in range(3):
            log.append_raw(harness.batch([b"x" * 100]))
    size = len(harness.batch([b"x" * 100]))

    async def body(h):
        tiny = await h.fetch(12, [("t", [(0, 0, 10, -1), (1, 0, 10, -1)])])
        capped = await h.fetch(12, [("t", [(0, 0, 1 << 20, -1), (1, 0, 1 << 20, -1),
                                           (2, 0, 1 << 20, -1)])], max_bytes=size * 4)
        zero = await h.fetch(12, [("t", [(0, 0, 1 << 20, -1)])], max_bytes=0)
        return tiny, capped, zero

    tiny, capped, zero = run(harness, body)
    # The first partition with data returns one whole batch beyond its limit; the next none.
    assert [len(p.records or b"") for p in tiny.responses[0].partitions] == [size, 0]
    assert [len(p.records or b"") for p in capped.responses[0].partitions] == [
        size * 3, size, 0]
    # A zero max_bytes still returns the first batch (Kafka's minOneMessage).
    assert len(zero.responses[0].partitions[0].records) == size


def test_fetch_errors_offsets_epochs_sessions_followers(harness):
    topic = harness.store.create_topic("t", partitions=1)
    topic.log(0).append_raw(harness.batch([b"a"]))

    async def body(h):
        out_of_range = await h.fetch(12, [("t", [(0, 5, 100, -1)])])
        at_end = await h.fetch(12, [("t", [(0, 1, 100, -1)])])
        fenced = await h.fetch(12, [("t", [(0, 0, 100, 1)])])
        old = await h.fetch(12, [("t", [(0, 0, 100, -5)])])
        incremental = await h.fetch(12, [("t", [(0, 0, 100, -1)])], session_epoch=3)
        initial = await h.fetch(12, [("t", [(0, 0, 1 << 20, -1)])], session_epoch=0)
        unknown_id = await h.fetch(13, [(uuid.uuid4(), [(0, 0, 100, -1)])])
        follower = await h.fetch(12, [("t", [(0, 0, 100, -1)])], replica_id=2)
        return out_of_range, at_end, fenced, old, incremental, initial, unknown_id, follower

    (out_of_range, at_end, fenced, old, incremental, initial, unknown_id,
     follower) = run(harness, body)
    p = out_of_range.responses[0].partitions[0]
    assert (int(p.error_code), p.high_watermark, p.log_start_offset) == (1, -1, -1)
    p = at_end.responses[0].partitions[0]
    assert (int(p.error_code), p.high_watermark, len(p.records or b"")) == (0, 1, 0)
    assert codes(fenced.responses[0].partitions) == [75]
    assert codes(old.responses[0].partitions) == [74]
    assert (int(incremental.error_code), incremental.responses) == (70, ())
    # A request to open a session (epoch 0) is answered in full with a new session id
    # (tests/server/test_fetch_sessions.py covers the sessions).
    assert int(initial.error_code) == 0 and initial.session_id > 0
    assert len(initial.responses[0].partitions[0].records) > 0
    assert codes(unknown_id.responses[0].partitions) == [100]
    assert codes(follower.responses[0].partitions) == [6]


def test_fetch_long_poll_wakes_on_produce_and_times_out(harness):
    harness.store.create_topic("t", partitions=1)

    async def body(h):
        waiting = asyncio.ensure_future(
            h.fetch(12, [("t", [(0, 0, 1 << 20, -1)])], max_wait_ms=int(WAIT_S * 1000)))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # nothing to read yet: it waits
        produced = await h.produce("t", [(0, h.batch([b"hello"]))])
        woken = await asyncio.wait_for(waiting, WAIT_S)
        empty = await h.fetch(12, [("t", [(0, 1, 1 << 20, -1)])], max_wait_ms=20)
        return produced, woken, empty

    produced, woken, empty = run(harness, body)
    assert codes(produced.responses[0].partition_responses) == [0]
    records = woken.responses[0].partitions[0].records
    assert [r.value for b in harness.be.iter_batches(records) for r in b.records()] == [b"hello"]
    assert len(empty.responses[0].partitions[0].records or b"") == 0


def _aborted_transaction(store):
    producer = store.producer(transactional_id="tx-1")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", b"doomed", partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send("t", b"kept", partition=0)
    producer.flush()
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("t", b"open", partition=0)
    producer.flush()
    return producer


def test_fetch_and_list_offsets_read_committed(harness):
    harness.store.create_topic("t", partitions=1)
    producer = _aborted_transaction(harness.store)
    log = harness.store.log(("t", 0))
    lso, hw = log.last_stable_offset, log.high_watermark
    assert lso < hw

    async def body(h):
        committed = await h.fetch(12, [("t", [(0, 0, 1 << 20, -1)])], isolation=1)
        uncommitted = await h.fetch(12, [("t", [(0, 0, 1 << 20, -1)])], isolation=0)
        latest = await h.list_offsets(5, "t", [(0, -1, -1)], isolation=1)
        latest_all = await h.list_offsets(5, "t", [(0, -1, -1)], isolation=0)
        return committed, uncommitted, latest, latest_all

    committed, uncommitted, latest, latest_all = run(harness, body)
    producer.abort_transaction()
    p = committed.responses[0].partitions[0]
    assert (p.high_watermark, p.last_stable_offset) == (hw, lso)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [
        (harness.store.describe_transaction("tx-1").producer_id, 0)]
    last = list(harness.be.iter_batches(p.records))[-1]
    assert last.last_offset < lso
    q = uncommitted.responses[0].partitions[0]
    assert q.aborted_transactions is None
    assert list(harness.be.iter_batches(q.records))[-1].last_offset == hw - 1
    assert (latest[0].offset, latest_all[0].offset) == (lso, hw)


# --- ListOffsets and OffsetForLeaderEpoch ----------------------------------------------------

def test_list_offsets_sentinels_times_and_errors(harness):
    topic = harness.store.create_topic("t", partitions=1)
    log = topic.log(0)
    now_ms = 1_700_000_000_000
    for i, ts in enumerate([now_ms, now_ms + 50, now_ms + 10]):
        log.append_raw(harness.batch([b"r%d" % i], timestamps_ms=[ts]), now_ms=now_ms)

    async def body(h):
        v9 = await h.list_offsets(9, "t", [(0, -2, -1), (0, -1, -1)])
        return (v9,
                await h.list_offsets(9, "t", [(0, -3, -1)]),
                await h.list_offsets(9, "t", [(0, now_ms + 5, -1)]),
                await h.list_offsets(9, "t", [(0, now_ms + 999, -1)]),
                await h.list_offsets(9, "t", [(0, -5, -1)]),
                await h.list_offsets(9, "t", [(0, -4, -1)]),
                await h.list_offsets(6, "t", [(0, -3, -1)]),
                await h.list_offsets(3, "t", [(0, -1, -1)]),
                await h.list_offsets(9, "t", [(0, -1, 4)]),
                await h.list_offsets(9, "t", [(3, -1, -1)]),
                await h.list_offsets(1, "nope", [(0, -1, -1)]))

    (dup, max_ts, by_time, too_late, tiered, local, old_max, v3, fenced, missing,
     unknown) = run(harness, body)
    assert [(int(p.error_code), p.offset) for p in dup] == [(42, -1), (42, -1)]
    assert [(p.offset, p.timestamp, p.leader_epoch) for p in max_ts] == [(1, now_ms + 50, 0)]
    assert [(p.offset, p.timestamp) for p in by_time] == [(1, now_ms + 50)]
    assert [(int(p.error_code), p.offset, p.timestamp) for p in too_late] == [(0, -1, -1)]
    assert [(p.offset, p.leader_epoch) for p in tiered] == [(-1, -1)]
    assert [p.offset for p in local] == [0]
    assert codes(old_max) == [35]
    assert [p.offset for p in v3] == [3] and not hasattr(v3[0], "leader_epoch")  # v4+
    assert codes(fenced) == [75]
    assert codes(missing) == [3]
    assert codes(unknown) == [3]


def test_offset_for_leader_epoch(harness):
    harness.store.create_topic("t", partitions=1).log(0).append_raw(harness.batch([b"a"] * 4))

    async def body(h):
        return await h.epochs(4, "t", [(0, -1, 0), (0, 0, 1), (0, 3, 0), (5, -1, 0)])

    answers = run(harness, body)
    assert [(int(p.error_code), p.leader_epoch, p.end_offset) for p in answers] == [
        (0, 0, 4), (0, -1, -1), (75, -1, -1), (3, -1, -1)]


def test_produce_transactional_batches_are_verified_with_the_coordinator(harness):
    from seglog.types import TopicPartition

    harness.store.create_topic("t", partitions=2)
    pid, epoch = harness.store.init_producer_id("tx-v", transaction_timeout_ms=60000)
    harness.store.add_partitions_to_txn("tx-v", pid, epoch, [TopicPartition("t", 0)])

    def txn_batch(seq, producer_id=pid):
        return harness.batch([b"t%d" % seq], producer_id=producer_id, producer_epoch=epoch,
                             base_sequence=seq, is_transactional=True)

    async def body(h):
        async def produce(partitions, transactional_id="tx-v"):
            cls = load_request_schema(0, 9)
            mod = _module(cls)
            request = build(cls, transactional_id=transactional_id, acks=-1,
                            timeout=datetime.timedelta(seconds=1),
                            topic_data=(build(mod.TopicProduceData, name="t", partition_data=tuple(
                                build(mod.PartitionProduceData, index=p, records=r)
                                for p, r in partitions)),))
            response = decode(0, 9, await data_produce.handle_produce(h.ctx(0, 9), request))
            return [(int(p.error_code), p.base_offset, p.error_message)
                    for p in response.responses[0].partition_responses]

        return (await produce([(0, txn_batch(0)), (1, txn_batch(0))]),
                await produce([(0, txn_batch(1))]),
                await produce([(0, txn_batch(2))], transactional_id=None),
                await produce([(0, txn_batch(2)), (1, txn_batch(0, producer_id=pid + 1))]))

    added_and_not, open_already, no_id, two_producers = run(harness, body)
    assert added_and_not == [(0, 0, None),
                             (48, -1, "Partition was not added to the transaction")]
    assert open_already == [(0, 1, None)]  # no second verification once the txn is open
    assert [code for code, *_ in no_id] == [53]
    assert [code for code, *_ in two_producers] == [49, 49]
    assert harness.store.log(("t", 1)).end_offset == 0


def test_a_long_poll_on_a_topic_deleted_meanwhile_answers_unknown_topic(harness):
    harness.store.create_topic("gone", partitions=1)

    async def body(h):
        waiting = asyncio.ensure_future(
            h.fetch(12, [("gone", [(0, 0, 1 << 20, -1)])], max_wait_ms=int(WAIT_S * 1000)))
        await asyncio.sleep(0.05)
        h.store.delete_topic("gone")
        h.state.appended.notify()  # what the admin API's DeleteTopics does after deleting
        return await asyncio.wait_for(waiting, WAIT_S)

    response = run(harness, body)
    assert codes(response.responses[0].partitions) == [3]


@pytest.mark.parametrize("version", [3, 4, 5, 7, 8, 9, 10, 11, 12, 13])
def test_produce_response_every_version_decodes(harness, version):
    topic = harness.store.create_topic("t", partitions=1,
                                       config={"message.timestamp.before.max.ms": "1000"})
    key = to_uuid(topic.topic_id) if version >= 13 else "t"

    async def body(h):
        good = await h.produce(key, [(0, h.batch([b"a"])), (4, h.batch([b"a"]))],
                               version=version)
        old = await h.produce(key, [(0, h.batch([b"a", b"b"], timestamps_ms=[h.state.now_ms(),
                                                                           1000]))],
                              version=version)
        return good, old

    good, old = run(harness, body)
    assert [(p.index, int(p.error_code), p.base_offset)
            for p in good.responses[0].partition_responses] == [(0, 0, 0), (4, 3, -1)]
    (p,) = old.responses[0].partition_responses
    assert int(p.error_code) == 32
    if version >= 8:
        assert [e.batch_index for e in p.record_errors] == [1]
        assert "out of range" in p.record_errors[0].batch_index_error_message
        assert p.error_message


def test_produce_of_mutated_batches_always_answers(harness):
    """Every single-byte mutation of a batch (and every truncation) is answered with an error
    code or appended; none escapes as an exception, and the log stays readable."""
    harness.store.create_topic("t", partitions=1)
    good = harness.batch([b"v1", b"v2"], timestamps_ms=[1_700_000_000_000] * 2)
    mutated = [good[:cut] for cut in range(0, len(good), 7)]
    for position in range(len(good)):
        for value in (0x00, 0xFF, good[position] ^ 0x01):
            data = bytearray(good)
            data[position] = value
            mutated.append(bytes(data))

    async def body(h):
        outcomes = set()
        for records in mutated:
            response = await h.produce("t", [(0, records)])
            outcomes.add(int(response.responses[0].partition_responses[0].error_code))
        return outcomes

    outcomes = run(harness, body)
    assert outcomes <= {0, 2, 10, 18, 32, 87}, outcomes
    assert {2, 87} <= outcomes
    log = harness.store.log(("t", 0))
    assert len(list(log.records())) == log.end_offset - log.start_offset


def test_fetch_with_absurd_numbers_is_answered(harness):
    harness.store.create_topic("t", partitions=1).log(0).append_raw(harness.batch([b"a"]))

    async def body(h):
        return [
            await h.fetch(12, [("t", [(0, -5, 100, -1)])]),
            await h.fetch(12, [("t", [(0, 0, -1, -1)])], max_bytes=-1, min_bytes=-1,
                          max_wait_ms=-1),
            await h.fetch(12, [("t", [(0, 0, 0, -1)])], max_bytes=0),
            await h.fetch(12, [("t", [(0, 2 ** 62, 2 ** 31 - 1, -1)])], min_bytes=2 ** 31 - 1,
                          max_wait_ms=50),
            await h.fetch(12, [("t", [(-1, 0, 100, -1)])]),
        ]

    negative, below_zero, zeros, huge, bad_partition = run(harness, body)
    assert codes(negative.responses[0].partitions) == [1]
    # Kafka's segment read refuses a negative size (UNKNOWN_SERVER_ERROR); zero still gets
    # the first whole batch (minOneMessage).
    assert codes(below_zero.responses[0].partitions) == [-1]
    (p,) = zeros.responses[0].partitions
    assert int(p.error_code) == 0 and len(p.records) > 0
    assert codes(huge.responses[0].partitions) == [1]
    assert codes(bad_partition.responses[0].partitions) == [3]
