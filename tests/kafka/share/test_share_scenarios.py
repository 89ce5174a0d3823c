"""Share groups (KIP-932) judged by real clients: the same scripted scenarios against Kafka 4.4
and against ``seglog serve`` (issue 25, "Tests"), each with Kafka's Java
``KafkaShareConsumer`` and with confluent-kafka's ``ShareConsumer``.

Every scenario records the history of its consumers (one line per delivery: member, partition,
offset, delivery count, acknowledgement, whether the broker confirmed it; see
``share_driver.py``) and judges it with the checker there. The scenarios:

- N consumers on one partition: every record delivered, accepted exactly once overall, never
  delivered again once accepted;
- RELEASE: a record released while its delivery count is below 3 comes back with counts 1, 2, 3;
- REJECT and the delivery-count limit (``group.share.delivery.count.limit``, 5): a rejected
  record is never delivered again, one released every time is delivered exactly 5 times;
- the dead-letter queue (KIP-1191): rejected and exhausted records written to the group's
  DLQ topic once, with Kafka's headers;
- lock expiry: a consumer that stops polling with records in hand loses them when the group's
  ``share.record.lock.duration.ms`` (15 s here, the lowest Kafka's default
  ``group.share.min.record.lock.duration.ms`` allows) passes; another consumer gets them with the
  delivery count one higher, not before the lock expired.

The broker kill and the ``kafka-share-groups`` tool are in ``test_share_faults_tools.py``.
Bounded: each consumer runs at most ``RUN_S`` seconds, each wait has a timeout.
"""

from __future__ import annotations

import time

import pytest

from share_driver import (
    CLIENTS, ShareConsumerProcess, check_accepted_exactly_once, check_all_confirmed,
    check_counts_increase, check_no_delivery_after_ack, confluent_share_missing, deliveries_of,
    history, wait_until)

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.kafka, pytest.mark.kafka_share]

RUN_S = 150
WAIT_S = 90.0
LOCK_MS = 15000
#: How much earlier than the lock duration a redelivery may be seen (the two clocks are the
#: same; this covers the consumer's poll returning a little after the broker acquired).
LOCK_SLACK_MS = 250


@pytest.fixture(params=CLIENTS)
def client(request):
    """The share-consumer implementation of this run ("java" or "confluent")."""
    if request.param == "confluent" and confluent_share_missing():
        pytest.skip(confluent_share_missing())
    return request.param


def _java(client, request):
    return request.getfixturevalue("share_java") if client == "java" else None


def _all_accepted(consumers, records):
    def done():
        accepted = {(d.partition, d.offset) for c in consumers for d in c.deliveries()
                    if d.ack == "ACCEPT" and d.confirmed}
        return set(records) <= accepted
    return done


def _stop_all(consumers):
    for c in consumers:
        c.stop()


def _context(consumers):
    return lambda: {c.member: c.tail() for c in consumers}


def test_n_consumers_one_partition(share_broker, client, request):
    records = 300
    topic = share_broker.new_topic("share-n", records=records)
    group = share_broker.new_group("share-n")
    java = _java(client, request)
    consumers = [ShareConsumerProcess(client, java, share_broker.bootstrap, group, topic,
                                      f"m{i}", run_s=RUN_S, rules=["max-poll=20"])
                 for i in range(3)]
    try:
        wanted = [(0, o) for o in range(records)]
        wait_until(_all_accepted(consumers, wanted), "every record accepted", WAIT_S,
                   _context(consumers))
    finally:
        _stop_all(consumers)
    h = history(consumers)
    assert check_accepted_exactly_once(h, wanted) == []
    assert check_no_delivery_after_ack(h) == []
    assert check_all_confirmed(h) == []
    assert check_counts_increase(h) == []


def test_release_and_redelivery(share_broker, client, request):
    records = 30
    topic = share_broker.new_topic("share-rel", records=records)
    group = share_broker.new_group("share-rel")
    consumer = ShareConsumerProcess(client, _java(client, request), share_broker.bootstrap,
                                    group, topic, "r0", run_s=RUN_S, rules=["release-below=3"])
    wanted = [(0, o) for o in range(records)]
    try:
        wait_until(_all_accepted([consumer], wanted), "every record accepted", WAIT_S,
                   _context([consumer]))
    finally:
        consumer.stop()
    h = history([consumer])
    assert check_all_confirmed(h) == []
    assert check_accepted_exactly_once(h, wanted) == []
    wrong = {o: deliveries_of(h, 0, o) for o in range(records)
             if deliveries_of(h, 0, o) != [(1, "RELEASE"), (2, "RELEASE"), (3, "ACCEPT")]}
    assert wrong == {}


def test_reject_and_delivery_count_limit(share_broker, client, request):
    records = 30
    topic = share_broker.new_topic("share-rej", records=records)
    group = share_broker.new_group("share-rej")
    rejected = [o for o in range(records) if o % 5 == 0]
    released = [o for o in range(records) if o % 5 == 1]
    accepted = [o for o in range(records) if o % 5 > 1]
    consumer = ShareConsumerProcess(client, _java(client, request), share_broker.bootstrap,
                                    group, topic, "x0", run_s=RUN_S,
                                    rules=["reject-mod=5:0", "release-mod=5:1"])
    limit = 5  # group.share.delivery.count.limit, Kafka's default

    def done():
        h = consumer.deliveries()
        return _all_accepted([consumer], [(0, o) for o in accepted])() and all(
            len(deliveries_of(h, 0, o)) >= limit for o in released)
    try:
        wait_until(done, f"accepted records and {limit} deliveries of the released ones",
                   WAIT_S, _context([consumer]))
        # A sixth delivery would come at once (the record is AVAILABLE and the consumer
        # polls every 200 ms): give it a few polls' time to show.
        time.sleep(3)
    finally:
        consumer.stop()
    h = history([consumer])
    assert check_all_confirmed(h) == []
    assert check_counts_increase(h) == []
    assert check_accepted_exactly_once(h, [(0, o) for o in accepted]) == []
    assert {o: deliveries_of(h, 0, o) for o in rejected} == {o: [(1, "REJECT")] for o in rejected}
    assert {o: deliveries_of(h, 0, o) for o in released} == {
        o: [(n, "RELEASE") for n in range(1, limit + 1)] for o in released}


def test_lock_expiry_of_a_consumer_that_stops_polling(share_broker, client, request):
    records = 20
    topic = share_broker.new_topic("share-lock", records=records)
    group = share_broker.new_group("share-lock", share_record_lock_duration_ms=str(LOCK_MS))
    java = _java(client, request)
    holder = ShareConsumerProcess(client, java, share_broker.bootstrap, group, topic, "holder",
                                  run_s=RUN_S, rules=["hold-after=0", "max-poll=5"])
    consumers = [holder]
    try:
        wait_until(lambda: holder.deliveries() != [], "the holder's first batch", WAIT_S,
                   _context(consumers))
        worker = ShareConsumerProcess(client, java, share_broker.bootstrap, group, topic,
                                      "worker", run_s=RUN_S)
        consumers.append(worker)
        wanted = [(0, o) for o in range(records)]
        wait_until(_all_accepted([worker], wanted), "every record accepted by the worker",
                   WAIT_S, _context(consumers))
    finally:
        _stop_all(consumers)
    held = holder.deliveries()
    assert held and all(d.ack == "HOLD" and d.delivery_count == 1 for d in held), held
    h = history(consumers)
    assert check_accepted_exactly_once(h, wanted) == []
    worker_h = consumers[1].deliveries()
    for d in held:
        # The held record comes to the worker once, one delivery later, not before the lock
        # expired (the message names both deliveries with their times).
        again = [w for w in worker_h if w.offset == d.offset]
        assert [w.delivery_count for w in again] == [2], (d, again)
        assert again[0].poll_ms >= d.poll_ms + LOCK_MS - LOCK_SLACK_MS, (d, again)
    assert check_counts_increase(h) == []


def _read_all(bootstrap, topic, expected, timeout_s):
    """Every record of ``topic``'s partition 0 (a plain consumer, assigned, from the start):
    waits until ``expected`` are read, then one more second for any extra."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-reader",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + timeout_s
    extra_until = None
    try:
        while time.monotonic() < deadline and (extra_until is None
                                               or time.monotonic() < extra_until):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                out.append(message)
            if extra_until is None and len(out) >= expected:
                extra_until = time.monotonic() + 1.0
    finally:
        consumer.close()
    return out


def test_dead_letter_queue_gets_rejected_and_exhausted_records(share_broker, client, request):
    """KIP-1191 (Kafka 4.4): the group's ``errors.deadletterqueue.topic.name`` (a topic with
    ``errors.deadletterqueue.group.enable=true``, named with the ``dlq.`` prefix) receives each
    REJECTed record and each record past the delivery-count limit once, copied
    (``errors.deadletterqueue.copy.record.enable``), with the ``__dlq.errors.*`` headers."""
    records = 20
    topic = share_broker.new_topic("share-dlq", records=records)
    dlq = share_broker.new_topic("dlq.share", config={"errors.deadletterqueue.group.enable":
                                                      "true"})
    group = share_broker.new_group("share-dlq", errors_deadletterqueue_topic_name=dlq,
                                   errors_deadletterqueue_copy_record_enable="true")
    rejected = [o for o in range(records) if o % 5 == 0]
    released = [o for o in range(records) if o % 5 == 1]
    accepted = [o for o in range(records) if o % 5 > 1]
    consumer = ShareConsumerProcess(client, _java(client, request), share_broker.bootstrap,
                                    group, topic, "d0", run_s=RUN_S,
                                    rules=["reject-mod=5:0", "release-mod=5:1"])

    def done():
        h = consumer.deliveries()
        return _all_accepted([consumer], [(0, o) for o in accepted])() and all(
            len(deliveries_of(h, 0, o)) >= 5 for o in released)
    try:
        wait_until(done, "accepted records and 5 deliveries of the released ones", WAIT_S,
                   _context([consumer]))
        dead = _read_all(share_broker.bootstrap, dlq, len(rejected) + len(released), WAIT_S)
    finally:
        consumer.stop()
    by_offset = {}
    for message in dead:
        headers = {k: v.decode() for k, v in (message.headers() or [])}
        offset = int(headers["__dlq.errors.offset"])
        assert offset not in by_offset, f"offset {offset} written to the DLQ twice"
        by_offset[offset] = (headers, message.value())
    assert sorted(by_offset) == sorted(rejected + released)
    for offset, (headers, value) in by_offset.items():
        assert value == b"%06d" % offset
        assert headers["__dlq.errors.topic"] == topic
        assert headers["__dlq.errors.partition"] == "0"
        assert headers["__dlq.errors.group"] == group
        assert headers["__dlq.errors.delivery.count"] == ("1" if offset in rejected else "5")
        assert headers["__dlq.errors.message"] == (
            "Offset rejected by client." if offset in rejected
            else "Offset delivery count exceeded the threshold.")
