"""Fetch sessions (KIP-227) on the wire, checked against the real Kafka 4.4 broker: the same raw
Fetch requests (kio-encoded, over a plain socket) go to ``seglog serve`` and, where java and the
jars are present, to Apache Kafka; both must give :data:`EXPECTED`, which records what Kafka
4.4.0 answered: a new session on epoch 0, incremental answers that hold only the partitions
with something new, forgotten partitions, every session error (FETCH_SESSION_ID_NOT_FOUND,
INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR), a partition error resent on every
incremental answer, closing a session with epoch -1, and the long poll of an incremental
request with nothing new. A second probe (:func:`probe_slots`) runs against brokers with
``max.incremental.fetch.session.cache.slots=8``: one session per shard, new sessions given to
the shards in turn, a full shard refusing a new session (session id 0) until its session is
closed.
"""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from seglog.server.apis.data_metadata import build

from test_data_differential import NOW_MS, Wire, _batch, _wait_for_topics

#: The long poll of the probe (ms): an incremental request with nothing new waits this long.
LONG_POLL_MS = 400


def _topic_id(w, name):
    r = w.call(3, 12, topics=(build(w.module(3, 12).MetadataRequestTopic, name=name,
                                    topic_id=None),),
               allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return r.topics[0].topic_id


def probe(bootstrap, create_topic):
    """Send every probe; returns {name: what matters of the answer}."""
    out = {}
    w = Wire(bootstrap)
    try:
        create_topic("s", 3)
        _wait_for_topics(w, ["s"])
        s_id = _topic_id(w, "s")

        def produce(partition, values):
            # Kafka's Metadata may show a new partition before its leader takes writes
            # (NOT_LEADER_OR_FOLLOWER for a moment): bounded retries.
            for _ in range(50):
                code = produce_once(partition, values)
                if code != 6:
                    return code
                time.sleep(0.1)
            return code

        def produce_once(partition, values):
            module = w.module(0, 9)
            r = w.call(0, 9, transactional_id=None, acks=1,
                       timeout=datetime.timedelta(seconds=5),
                       topic_data=(build(module.TopicProduceData, name="s", partition_data=(
                           build(module.PartitionProduceData, index=partition,
                                 records=_batch(values, NOW_MS)),)),))
            return int(r.responses[0].partition_responses[0].error_code)

        for partition in range(3):
            out[f"produce_{partition}"] = produce(partition, [b"a", b"b"])

        def fetch(session_id, epoch, parts, *, forget=(), version=12, max_wait_ms=0,
                  topic="s"):
            """``parts``: [(partition, fetch offset)] of ``topic``; ``forget``: partitions of
            "s". Returns (error, session id, [(partition, error, hw, records?)], response)."""
            module = w.module(1, version)
            key = {"topic_id": s_id if topic == "s" else uuid.uuid4()} if version >= 13 \
                else {"topic": topic}
            topics = (build(module.FetchTopic, **key, partitions=tuple(build(
                module.FetchPartition, partition=p, fetch_offset=o,
                partition_max_bytes=1 << 20, current_leader_epoch=-1, log_start_offset=-1)
                for p, o in parts)),) if parts else ()
            fkey = {"topic_id": s_id} if version >= 13 else {"topic": "s"}
            forgotten = (build(module.ForgottenTopic, **fkey, partitions=tuple(forget)),) \
                if forget else ()
            r = w.call(1, version, replica_id=-1,
                       max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
                       max_bytes=1 << 20, isolation_level=0, session_id=session_id,
                       session_epoch=epoch, topics=topics, forgotten_topics_data=forgotten,
                       rack_id="")
            parts_out = sorted(
                (t.topic if version < 13 else ("s" if t.topic_id == s_id else "?"),
                 p.partition_index, int(p.error_code), p.high_watermark,
                 len(p.records or b"") > 0)
                for t in r.responses for p in t.partitions)
            return int(r.error_code), r.session_id, parts_out

        code, a, parts = fetch(0, 0, [(0, 0), (1, 0), (2, 0)])
        out["open"] = (code, a > 0, parts)
        # Caught up: every partition at its end, nothing new, so nothing is answered.
        code, sid, parts = fetch(a, 1, [(0, 2), (1, 2), (2, 2)])
        out["caught_up"] = (code, sid == a, parts)
        out["produce_1_more"] = produce(1, [b"c"])
        code, sid, parts = fetch(a, 2, [])
        out["only_new_data"] = (code, sid == a, parts)
        code, sid, parts = fetch(a, 2, [])
        out["epoch_replayed"] = (code, sid, parts)
        code, sid, parts = fetch(a, 3, [(1, 3)], forget=[0])
        out["forget_0"] = (code, sid == a, parts)
        out["produce_0_more"] = produce(0, [b"d"])
        code, sid, parts = fetch(a, 4, [])
        out["forgotten_not_read"] = (code, sid == a, parts)
        code, sid, parts = fetch(a + 1 if a % 2 == 0 else a - 1, 5, [])
        out["unknown_session"] = (code, sid, parts)
        code, sid, parts = fetch(a, 5, [], version=13)
        out["topic_ids_changed"] = (code, sid, parts)
        # The session survived the errors: epoch 5 is still the one expected.
        started = time.monotonic()
        code, sid, parts = fetch(a, 5, [], max_wait_ms=LONG_POLL_MS)
        out["long_poll"] = (code, sid == a, parts,
                            time.monotonic() - started >= LONG_POLL_MS / 1000 * 0.8)
        # Re-adding partition 0 brings its new record; a bad partition is answered each time.
        code, sid, parts = fetch(a, 6, [(0, 2)])
        out["re_add_0"] = (code, sid == a, parts)
        code, sid, parts = fetch(a, 7, [(0, 3), (9, 0)])
        out["bad_partition"] = (code, sid == a, parts)
        code, sid, parts = fetch(a, 8, [])
        out["bad_partition_again"] = (code, sid == a, parts)
        # Forgetting every partition ends the session: sessionless answer (id 0).
        code, sid, parts = fetch(a, 9, [], forget=[0, 1, 2, 9])
        out["forget_all"] = (code, sid, parts)
        code, sid, parts = fetch(a, 10, [])
        out["after_forget_all"] = (code, sid, parts)
        # Epoch -1 closes the session it names and is answered without one.
        code, b, parts = fetch(0, 0, [(2, 2)])
        code2, sid, parts2 = fetch(b, -1, [(2, 0)])
        out["close"] = (code, b > 0, parts, code2, sid, parts2)
        out["after_close"] = fetch(b, 1, [])
        # A v13 session names topics by id; v12 on it is a topic-id error; an unknown topic
        # id in a session is answered UNKNOWN_TOPIC_ID every time.
        code, c, parts = fetch(0, 0, [(0, 3)], version=13)
        out["open_v13"] = (code, c > 0, parts)
        out["v12_on_v13"] = fetch(c, 1, [])
        code, sid, parts = fetch(c, 1, [(0, 0)], version=13, topic="?")
        out["v13_unknown_id"] = (code, sid == c, parts)
    finally:
        w.close()
    return out


#: The slots of the second probe's brokers: 8 shards of one session each.
SLOTS = 8
#: Kafka's shard id range: Int.MaxValue / 8.
SHARD_ID_RANGE = (2**31 - 1) // 8


def probe_slots(bootstrap, create_topic):
    """Open sessions until a shard is full, close one, open again; {name: answer}."""
    out = {}
    w = Wire(bootstrap)
    try:
        create_topic("q", 1)
        _wait_for_topics(w, ["q"])
        module = w.module(1, 12)

        def open_session(session_id=0, epoch=0, replica_id=-1):
            r = w.call(1, 12, replica_id=replica_id, max_wait=datetime.timedelta(0), min_bytes=1,
                       max_bytes=1 << 20, isolation_level=0, session_id=session_id,
                       session_epoch=epoch, topics=(build(module.FetchTopic, topic="q",
                                                          partitions=(build(
                           module.FetchPartition, partition=0, fetch_offset=0,
                           partition_max_bytes=1 << 20, current_leader_epoch=-1,
                           log_start_offset=-1),)),), forgotten_topics_data=(), rack_id="")
            assert int(r.error_code) == 0
            return r.session_id

        ids = [open_session() for _ in range(SLOTS)]
        out["shards_in_turn"] = [i // SHARD_ID_RANGE for i in ids]
        # Round robin reaches shard 0 again: full of a young session of the same size.
        out["ninth_refused"] = open_session()
        # Close shard 1's session (epoch -1 naming it): the next turn is shard 1's.
        out["closed"] = open_session(ids[1], -1)
        tenth = open_session()
        out["tenth_in_shard_1"] = (tenth > 0, tenth // SHARD_ID_RANGE)
        # A full request (epoch 0) naming a session closes it first, then opens a new one
        # in the next shard in turn (2: the one it just emptied).
        again = open_session(ids[2], 0)
        out["reopen_in_shard_2"] = (again > 0, again // SHARD_ID_RANGE, again != ids[2])
        out["closed_one_gone"] = w.call(
            1, 12, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
            max_bytes=1 << 20, isolation_level=0, session_id=ids[2], session_epoch=1,
            topics=(), forgotten_topics_data=(), rack_id="").error_code
    finally:
        w.close()
    return out


EXPECTED_SLOTS = {
    "shards_in_turn": list(range(8)),
    "ninth_refused": 0,
    "closed": 0,
    "tenth_in_shard_1": (True, 1),
    "reopen_in_shard_2": (True, 2, True),
    "closed_one_gone": 70,
}


EXPECTED = {
    "produce_0": 0, "produce_1": 0, "produce_2": 0,
    "open": (0, True, [("s", 0, 0, 2, True), ("s", 1, 0, 2, True), ("s", 2, 0, 2, True)]),
    "caught_up": (0, True, []),
    "produce_1_more": 0,
    "only_new_data": (0, True, [("s", 1, 0, 3, True)]),
    "epoch_replayed": (71, 0, []),
    "forget_0": (0, True, []),
    "produce_0_more": 0,
    "forgotten_not_read": (0, True, []),
    "unknown_session": (70, 0, []),
    "topic_ids_changed": (106, 0, []),
    "long_poll": (0, True, [], True),
    "re_add_0": (0, True, [("s", 0, 0, 3, True)]),
    "bad_partition": (0, True, [("s", 9, 3, -1, False)]),
    "bad_partition_again": (0, True, [("s", 9, 3, -1, False)]),
    "forget_all": (0, 0, []),
    "after_forget_all": (70, 0, []),
    "close": (0, True, [("s", 2, 0, 2, False)], 0, 0, [("s", 2, 0, 2, True)]),
    "after_close": (70, 0, []),
    "open_v13": (0, True, [("s", 0, 0, 3, False)]),
    "v12_on_v13": (106, 0, []),
    "v13_unknown_id": (0, True, [("?", 0, 100, -1, False)]),
}


def _compare(got, expected=EXPECTED):
    assert {k: (v, expected.get(k)) for k, v in got.items() if v != expected.get(k)} == {}
    assert set(got) == set(expected)


def test_seglog_sessions_as_kafka(broker):
    _compare(probe(broker.bootstrap,
                   lambda name, partitions: broker.store.create_topic(name, partitions)))
    counts = broker.state.extensions["seglog.server.fetch_sessions"].counts
    assert (counts["incremental"], counts["error"], counts["full"]) == (9, 6, 3)


def test_seglog_session_slots_as_kafka(broker_factory):
    broker = broker_factory(max_incremental_fetch_session_cache_slots=SLOTS)
    _compare(probe_slots(broker.bootstrap, lambda name, partitions: broker.store.create_topic(
        name, partitions)), EXPECTED_SLOTS)


def _kafka_probe(tmp_path, probe_fn, expected, **extra_properties):
    from seglog.bench.kafka import KafkaBroker, find_kafka

    ref, why = find_kafka()
    if ref is None:
        pytest.skip(why)
    kafka = pytest.importorskip("kafka")
    from kafka.admin import NewTopic

    broker = KafkaBroker(ref, tmp_path / "kafka", extra_properties=extra_properties)
    broker.format()
    broker.start()
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        _compare(probe_fn(broker.bootstrap, lambda name, partitions: admin.create_topics(
            [NewTopic(name, partitions, 1)])), expected)
    finally:
        admin.close()
        broker.stop()


@pytest.mark.kafka
@pytest.mark.slow  # a Kafka broker starts in ~12 s
def test_kafka_session_slots_as_recorded(tmp_path):
    _kafka_probe(tmp_path, probe_slots, EXPECTED_SLOTS,
                 **{"max.incremental.fetch.session.cache.slots": SLOTS})


@pytest.mark.kafka
@pytest.mark.slow  # a Kafka broker starts in ~12 s
def test_kafka_sessions_as_recorded(tmp_path):
    _kafka_probe(tmp_path, probe, EXPECTED)
