"""The versions raised to Kafka 4.4's top (issue 24), checked against the real Kafka 4.4 broker:
ListTransactions v2 (the TransactionalIdPattern filter: a regular expression the whole id must
match; null or empty takes all; one that does not compile is INVALID_REGULAR_EXPRESSION) and
DeleteGroups v3 (each result's ErrorMessage, null for these errors, as Kafka leaves it). The
same requests go to ``seglog serve`` and, where java and the jars are present, to Kafka; both
must give :data:`EXPECTED`, which records what Kafka 4.4.0 answered. Results are compared as
sets: Kafka orders DeleteGroups results by coordinator partition."""

from __future__ import annotations

import time

import pytest

from kafka_waits import eventually
from test_data_differential import Wire

confluent_kafka = pytest.importorskip("confluent_kafka")

WAIT_S = 30.0
TOPIC = "versions-t"
PATTERNS = (None, "", "alpha", "alpha.*", "al", r".*-\d", "[", "(?i)ALPHA.*", "a{2,1}")

EXPECTED = {
    "list None": (0, [("alpha", "CompleteAbort"), ("alpha-1", "CompleteAbort"),
                      ("beta-2", "CompleteCommit")]),
    "list ''": (0, [("alpha", "CompleteAbort"), ("alpha-1", "CompleteAbort"),
                    ("beta-2", "CompleteCommit")]),
    "list 'alpha'": (0, [("alpha", "CompleteAbort")]),
    "list 'alpha.*'": (0, [("alpha", "CompleteAbort"), ("alpha-1", "CompleteAbort")]),
    "list 'al'": (0, []),
    "list '.*-\\\\d'": (0, [("alpha-1", "CompleteAbort"), ("beta-2", "CompleteCommit")]),
    "list '['": (128, []),  # INVALID_REGULAR_EXPRESSION
    "list '(?i)ALPHA.*'": (0, [("alpha", "CompleteAbort"), ("alpha-1", "CompleteAbort")]),
    "list 'a{2,1}'": (128, []),
    # GROUP_ID_NOT_FOUND (the empty id too), NON_EMPTY_GROUP, deleted; a repeated id once.
    "delete v3": [("", 69, None), ("g-busy", 68, None), ("g-empty", 0, None),
                  ("nope", 69, None)],
    "delete v2": [("nope", 69)],
}


def _setup(bootstrap):
    """Three transactional ids (two aborted, one committed), a group with a live member and a
    group with only committed offsets; returns the member's consumer (closed by the caller)."""
    for transactional_id in ("alpha-1", "beta-2", "alpha"):
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                             "transactional.id": transactional_id})
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        producer.produce(TOPIC, b"x")
        assert producer.flush(WAIT_S) == 0
        if transactional_id == "beta-2":
            producer.commit_transaction(WAIT_S)
        else:
            producer.abort_transaction(WAIT_S)
    busy = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g-busy",
                                     "session.timeout.ms": 45000})
    busy.subscribe([TOPIC])
    deadline = time.monotonic() + WAIT_S
    while not busy.assignment() and time.monotonic() < deadline:
        busy.poll(0.2)
    assert busy.assignment()
    empty = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "g-empty"})
    empty.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    empty.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    empty.close()
    return busy


def probe(bootstrap):
    """Every probe's answer, by name."""
    busy = _setup(bootstrap)
    wire = Wire(bootstrap)
    out = {}
    try:
        # A transaction's end is answered once it is prepared; the coordinator writes the
        # markers and completes it a moment later: wait, bounded, until every one completed.
        eventually(lambda: wire.call(66, 2, state_filters=(), producer_id_filters=(),
                                     duration_filter=-1, transactional_id_pattern=None),
                   lambda r: all(s.transaction_state.startswith("Complete")
                                 for s in r.transaction_states))
        for pattern in PATTERNS:
            response = wire.call(66, 2, state_filters=(), producer_id_filters=(),
                                 duration_filter=-1, transactional_id_pattern=pattern)
            out[f"list {pattern!r}"] = (int(response.error_code), sorted(
                (s.transactional_id, s.transaction_state) for s in response.transaction_states))
        response = wire.call(42, 3, groups_names=("nope", "g-busy", "g-empty", "g-empty", ""))
        out["delete v3"] = sorted((r.group_id, int(r.error_code), r.error_message)
                                  for r in response.results)
        response = wire.call(42, 2, groups_names=("nope",))
        out["delete v2"] = [(r.group_id, int(r.error_code)) for r in response.results]
    finally:
        wire.close()
        busy.close()
    return out


def test_seglog_answers_as_kafka(broker):
    got = probe(broker.bootstrap)
    assert {k: v for k, v in got.items() if v != EXPECTED.get(k)} == {}
    assert set(got) == set(EXPECTED)


@pytest.mark.kafka
@pytest.mark.slow  # a Kafka broker starts in seconds; transactions wait for its coordinator
def test_kafka_answers_as_recorded(tmp_path):
    from seglog.bench.kafka import KafkaBroker, find_kafka

    ref, why = find_kafka()
    if ref is None:
        pytest.skip(why)
    broker = KafkaBroker(ref, tmp_path / "kafka")
    broker.format()
    broker.start()
    try:
        got = probe(broker.bootstrap)
    finally:
        broker.stop()
    assert {k: v for k, v in got.items() if v != EXPECTED.get(k)} == {}
    assert set(got) == set(EXPECTED)
