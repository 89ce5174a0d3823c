"""The default run's share-group check (the full scenarios are behind ``-m kafka_share``): one
Java ``KafkaShareConsumer`` and one confluent-kafka ``ShareConsumer`` in one share group on
one partition, against Kafka 4.4 and ``seglog serve``; every record accepted exactly once
overall, with delivery count 1, and never delivered again once accepted."""

from __future__ import annotations

import pytest

from share_driver import (
    ShareConsumerProcess, check_accepted_exactly_once, check_all_confirmed,
    check_counts_increase, check_no_delivery_after_ack, confirmed_accepts,
    confluent_share_missing, history, wait_until)

pytestmark = pytest.mark.kafka

WAIT_S = 60.0


def test_java_and_confluent_share_one_partition(share_broker, share_java):
    if confluent_share_missing():
        pytest.skip(confluent_share_missing())
    records = 100
    topic = share_broker.new_topic("share-smoke", records=records)
    group = share_broker.new_group("share-smoke")
    consumers = [
        ShareConsumerProcess("java", share_java, share_broker.bootstrap, group, topic, "java",
                             run_s=90, rules=["max-poll=10"]),
        ShareConsumerProcess("confluent", None, share_broker.bootstrap, group, topic,
                             "confluent", run_s=90, rules=["max-poll=10"]),
    ]
    wanted = [(0, o) for o in range(records)]
    try:
        wait_until(lambda: set(wanted) <= set(confirmed_accepts(history(consumers))),
                   "every record accepted", WAIT_S,
                   lambda: {c.member: c.tail() for c in consumers})
    finally:
        for c in consumers:
            c.stop()
    h = history(consumers)
    assert check_accepted_exactly_once(h, wanted) == []
    assert check_no_delivery_after_ack(h) == []
    assert check_all_confirmed(h) == []
    assert check_counts_increase(h) == []
