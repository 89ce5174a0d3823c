"""A wire group with members keeps its committed offsets when the store's own maintenance
expires offsets (``Store.expire_offsets``, run by the broker's maintenance loop and by
``Store.maintain``), and an in-process consumer cannot join a group that wire members hold:
the embedded and the classic coordinator never share one group's membership."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CTopicPartition

from seglog.errors import IllegalStateError
from seglog.types import TopicPartition

pytestmark = pytest.mark.clients

WAIT_S = 20.0
TEN_DAYS_MS = 10 * 24 * 3600 * 1000


def test_live_wire_group_keeps_offsets_and_refuses_embedded_members(broker_factory, tmp_path):
    broker = broker_factory(data_dir=tmp_path / "data", group_min_session_timeout_ms=100)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("t", value=b"v")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 100})
    try:
        consumer.subscribe(["t"])
        deadline = time.monotonic() + WAIT_S
        message = None
        while message is None or message.error():
            assert time.monotonic() < deadline, "no record consumed in time"
            message = consumer.poll(0.1)
        consumer.commit(message=message, asynchronous=False)
        tp = TopicPartition("t", 0)
        assert broker.store.group("g").committed(tp) == 1

        # Ten days later by the store's clock: the group still has its member.
        removed = broker.store.expire_offsets(now_ms=int(time.time() * 1000) + TEN_DAYS_MS)
        assert "g" not in removed
        assert broker.store.group("g").committed(tp) == 1
        committed = consumer.committed([CTopicPartition("t", 0)], timeout=10)
        assert committed[0].offset == 1

        with pytest.raises(IllegalStateError):
            broker.store.join_group("g", member_id=None, client_id="embedded",
                                    topics=frozenset({"t"}), assignor="range",
                                    group_instance_id=None)
    finally:
        consumer.close()
    # Once the member left, the group is empty and its offsets may expire.
    deadline = time.monotonic() + WAIT_S
    while True:
        removed = broker.store.expire_offsets(now_ms=int(time.time() * 1000) + TEN_DAYS_MS)
        if "g" in removed or broker.store.group("g").committed(TopicPartition("t", 0)) is None:
            break
        assert time.monotonic() < deadline, "the empty group's offsets never expired"
        time.sleep(0.05)
