"""The broker's maintenance task: Kafka's timers (retention, offset expiry) run on the
broker's loop at the configured intervals, with no caller driving them."""

from __future__ import annotations

import time

import pytest


def _wait_until(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


@pytest.mark.parametrize("backend", ["native", "pure"])
def test_retention_runs_every_check_interval(broker_factory, backend):
    broker = broker_factory(backend=backend, log_retention_check_interval_ms=20,
                            log_retention_bytes=2048, log_segment_bytes=1024,
                            log_segment_delete_delay_ms=0)
    topic = broker.store.create_topic("t")
    producer = broker.store.producer()
    for i in range(60):
        producer.send("t", b"x" * 100)
        producer.flush()
    log = topic.log(0)
    _wait_until(lambda: log.start_offset > 0)
    assert topic.end_offsets() == {0: 60}


def test_offsets_expire_every_check_interval(broker_factory):
    broker = broker_factory(offsets_retention_check_interval_ms=20, offsets_retention_minutes=1)
    store = broker.store
    store.create_topic("t")
    producer = store.producer()
    producer.send("t", b"v")
    producer.flush()
    consumer = store.consumer("g", topics=["t"])
    consumer.poll(timeout_ms=2000)
    consumer.commit()
    consumer.close()
    assert store.offset_fetch("g", ("t", 0)) is not None
    # One minute is the smallest retention Kafka allows: the expiry runs, the commit is
    # young, it stays (the store's own tests expire offsets with a clock they set).
    time.sleep(0.1)
    assert store.offset_fetch("g", ("t", 0)) is not None
