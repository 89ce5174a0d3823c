"""The embedded Log, Producer and Consumer count what they did (``.metrics()``, a dict under
the broker's metric names where they mean the same: docs/metrics.md)."""

from __future__ import annotations

import seglog
from seglog.server.metrics_export import METRICS
from seglog.storage import counters

SERVED = {m.name for m in METRICS}


def test_log_producer_and_consumer_count_what_they_did(tmp_path):
    with seglog.Store(tmp_path / "data") as store:
        store.create_topic("embedded", partitions=1)
        log = store.topic("embedded").log(0)
        before = log.metrics()
        assert before[counters.MESSAGES_IN] == 0 and before[counters.LOG_SIZE] == 0
        with store.producer(linger_ms=0) as producer:
            for i in range(6):
                producer.send("embedded", b"v" * (i + 1))
            producer.send_batch("embedded", [b"w" * 20] * 4)
            producer.flush()
            sent = producer.metrics()
        assert sent[counters.PRODUCER_RECORDS_SENT] == 10
        after = log.metrics()
        assert after[counters.MESSAGES_IN] == 10
        assert after[counters.LOG_END_OFFSET] == 10
        on_disk = sum(f.stat().st_size for f in (tmp_path / "data" / "embedded-0").glob("*.log"))
        assert after[counters.BYTES_IN] == after[counters.LOG_SIZE] == on_disk
        # The producer's byte figure is its estimate: at least the records' payload.
        assert sent[counters.PRODUCER_BYTES_SENT] >= sum(range(1, 7)) + 80
        log.flush()
        flushed = log.metrics()
        assert flushed[counters.LOG_FLUSH + "_count"] >= 1
        assert flushed[counters.LOG_FLUSH + "_sum"] >= 0
        consumer = store.consumer(topics=["embedded"], group_id="embedded-group",
                                  auto_offset_reset="earliest")
        try:
            records = []
            for _ in range(20):  # bounded: each poll waits at most 500 ms
                records += consumer.poll(timeout_ms=500)
                if len(records) >= 10:
                    break
            assert len(records) == 10
            got = consumer.metrics()
        finally:
            consumer.close()
        assert got[counters.CONSUMER_RECORDS_CONSUMED] == 10
        assert got[counters.CONSUMER_BYTES_CONSUMED] == on_disk
        assert log.metrics()[counters.BYTES_OUT] >= on_disk


def test_the_logs_names_are_the_brokers():
    names = set(counters.LogCounters().as_dict(counters.MsHistogram()))
    for name in names:
        base = name.rsplit("_", 1)[0] if name.endswith(("_count", "_sum")) else name
        assert name in SERVED or base in SERVED, name
    for name in (counters.LOG_SIZE, counters.LOG_END_OFFSET, counters.LOG_START_OFFSET,
                 counters.LOG_SEGMENTS):
        assert name in SERVED
