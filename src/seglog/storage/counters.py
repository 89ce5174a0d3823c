"""Counters of the embedded Log, Producer and Consumer, and the metric names they share with
the broker's Prometheus endpoint (:mod:`seglog.server.metrics`, ``docs/metrics.md``).

The names are Kafka's MBeans as the Prometheus JMX exporter's standard rules name them
(``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec`` ->
``kafka_server_brokertopicmetrics_messagesin_total``); the clients' are Kafka's client
metrics as the exporter names them (``kafka.producer:type=producer-metrics``,
attribute ``record-send-total`` -> ``kafka_producer_producer_metrics_record_send_total``).

The hot paths only add to plain attributes (a Log's appends and reads under its lock); the
dicts are made when asked (``Log.metrics()``). This module imports nothing of seglog, so
storage, the clients and the server can all use it.
"""

from __future__ import annotations

import bisect

__all__ = ["MESSAGES_IN", "BYTES_IN", "BYTES_OUT", "LOG_FLUSH", "LOG_SIZE", "LOG_END_OFFSET",
           "LOG_START_OFFSET", "LOG_SEGMENTS", "PRODUCER_RECORDS_SENT",
           "PRODUCER_BYTES_SENT", "CONSUMER_RECORDS_CONSUMED", "CONSUMER_BYTES_CONSUMED",
           "FLUSH_BUCKETS_MS", "MsHistogram", "LogCounters", "ClientCounters"]

#: ``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec``: records appended.
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
#: ``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec``: record batch bytes appended.
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
#: ``kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec``: record batch bytes read out.
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
#: ``kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs``: flushes and their time (ms),
#: a histogram (``_count``, ``_sum``, ``_bucket``).
LOG_FLUSH = "kafka_log_logflushstats_logflushrateandtimems"
#: ``kafka.log:type=Log,name=Size``: the partition's bytes on disk.
LOG_SIZE = "kafka_log_log_size"
#: ``kafka.log:type=Log,name=LogEndOffset``.
LOG_END_OFFSET = "kafka_log_log_logendoffset"
#: ``kafka.log:type=Log,name=LogStartOffset``.
LOG_START_OFFSET = "kafka_log_log_logstartoffset"
#: ``kafka.log:type=Log,name=NumLogSegments``.
LOG_SEGMENTS = "kafka_log_log_numlogsegments"
#: ``kafka.producer:type=producer-metrics`` ``record-send-total``: records written.
PRODUCER_RECORDS_SENT = "kafka_producer_producer_metrics_record_send_total"
#: ``kafka.producer:type=producer-topic-metrics`` ``byte-total``: bytes of the record
#: batches written, as the producer estimates them before the Log encodes them (an upper
#: bound; the Log's BYTES_IN is exact).
PRODUCER_BYTES_SENT = "kafka_producer_producer_topic_metrics_byte_total"
#: ``kafka.consumer:type=consumer-fetch-manager-metrics`` ``records-consumed-total``.
CONSUMER_RECORDS_CONSUMED = "kafka_consumer_consumer_fetch_manager_metrics_records_consumed_total"
#: ``kafka.consumer:type=consumer-fetch-manager-metrics`` ``bytes-consumed-total``: record
#: batch bytes read.
CONSUMER_BYTES_CONSUMED = "kafka_consumer_consumer_fetch_manager_metrics_bytes_consumed_total"

#: The upper bounds (ms) of the flush and request time histograms' buckets (+Inf after).
FLUSH_BUCKETS_MS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0,
                    2500.0, 5000.0, 10000.0)


class MsHistogram:
    """Times in milliseconds counted into buckets (``bounds_ms``, then +Inf): an observation
    is a bisect and two adds; the cumulative Prometheus form is made when read."""

    __slots__ = ("bounds_ms", "counts", "sum_ms")

    def __init__(self, bounds_ms: tuple[float, ...] = FLUSH_BUCKETS_MS):
        self.bounds_ms = bounds_ms
        self.counts = [0] * (len(bounds_ms) + 1)
        self.sum_ms = 0.0

    def observe(self, ms: float) -> None:
        """Count one observation of ``ms`` milliseconds."""
        self.counts[bisect.bisect_left(self.bounds_ms, ms)] += 1
        self.sum_ms += ms

    @property
    def count(self) -> int:
        """How many observations."""
        return sum(self.counts)

    def add(self, other: "MsHistogram") -> None:
        """Add ``other``'s observations (the same bounds) to this one."""
        for index, count in enumerate(other.counts):
            self.counts[index] += count
        self.sum_ms += other.sum_ms

    def cumulative(self) -> list[tuple[str, int]]:
        """``[(le, observations <= le), ...]`` ending with ``("+Inf", count)``."""
        total = 0
        out = []
        for bound, count in zip((*map(str, self.bounds_ms), "+Inf"), self.counts):
            total += count
            out.append((bound, total))
        return out


class LogCounters:
    """One Log's counters: records and bytes appended, bytes read (updated under the Log's
    lock). Its flush times are its LocalLog's (``flush_times``, an :class:`MsHistogram`)."""

    __slots__ = ("records_in", "bytes_in", "bytes_out")

    def __init__(self) -> None:
        self.records_in = 0
        self.bytes_in = 0
        self.bytes_out = 0

    def as_dict(self, flush_times: MsHistogram) -> dict[str, float]:
        """The counters by their metric names, with ``flush_times`` as ``_count`` and
        ``_sum`` (ms)."""
        return {MESSAGES_IN: float(self.records_in), BYTES_IN: float(self.bytes_in),
                BYTES_OUT: float(self.bytes_out),
                LOG_FLUSH + "_count": float(flush_times.count),
                LOG_FLUSH + "_sum": flush_times.sum_ms}


class ClientCounters:
    """An embedded client's record and byte counters under the names given."""

    __slots__ = ("records_name", "bytes_name", "records", "size_bytes")

    def __init__(self, records_name: str, bytes_name: str):
        self.records_name = records_name
        self.bytes_name = bytes_name
        self.records = 0
        self.size_bytes = 0

    def as_dict(self) -> dict[str, float]:
        """``{records name: records, bytes name: bytes}``."""
        return {self.records_name: float(self.records), self.bytes_name: float(self.size_bytes)}
