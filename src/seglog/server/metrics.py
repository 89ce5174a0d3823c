"""The broker's hot-path counters (Kafka's BrokerTopicMetrics and RequestMetrics), counted by
the request path and read by the Prometheus endpoint (:mod:`seglog.server.metrics_export`,
``seglog serve --metrics-listen``, ``docs/metrics.md``).

Every update runs on the broker's event loop and is a dict lookup and an add (a request's
times: a bisect more); nothing here formats, locks or allocates per record. The gauges
(sizes, leaders, groups, lag) are not kept here: the exporter computes them when scraped.
"""

from __future__ import annotations

from ..storage.counters import MsHistogram

__all__ = ["BrokerMetrics", "REQUEST_BUCKETS_MS"]

#: The upper bounds (ms) of the request time histograms' buckets (+Inf after).
REQUEST_BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
                      1000.0, 2500.0, 5000.0, 10000.0, 30000.0)


class BrokerMetrics:
    """One broker's counters: records and bytes in and out per topic, requests per API and
    version, and each API's request total time and queue time (ms histograms). Read from
    the exporter's thread as snapshots (``dict(...)`` copies), written on the loop only."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "produce_requests",
                 "fetch_requests", "requests", "total_times", "queue_times")

    def __init__(self) -> None:
        #: ``{topic: records appended by Produce}`` (MessagesInPerSec).
        self.messages_in: dict[str, int] = {}
        #: ``{topic: record batch bytes appended by Produce}`` (BytesInPerSec).
        self.bytes_in: dict[str, int] = {}
        #: ``{topic: record bytes answered to consumers' Fetch}`` (BytesOutPerSec).
        self.bytes_out: dict[str, int] = {}
        #: ``{topic: partitions appended}`` (TotalProduceRequestsPerSec, per partition).
        self.produce_requests: dict[str, int] = {}
        #: ``{topic: partitions read by consumers}`` (TotalFetchRequestsPerSec).
        self.fetch_requests: dict[str, int] = {}
        #: ``{api_key << 16 | api_version: requests}`` (RequestsPerSec; an int key, cheaper
        #: than a tuple on every request): see :meth:`request_counts`.
        self.requests: dict[int, int] = {}
        #: ``{api_key: MsHistogram}``: received to answered (TotalTimeMs).
        self.total_times: dict[int, MsHistogram] = {}
        #: ``{api_key: MsHistogram}``: read from the socket to handled (RequestQueueTimeMs).
        self.queue_times: dict[int, MsHistogram] = {}

    def appended(self, topic: str, records: int, size_bytes: int) -> None:
        """Produce appended ``records`` records in ``size_bytes`` bytes to ``topic``."""
        self.messages_in[topic] = self.messages_in.get(topic, 0) + records
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + size_bytes
        self.produce_requests[topic] = self.produce_requests.get(topic, 0) + 1

    def sent(self, topic: str, size_bytes: int) -> None:
        """A consumer's Fetch answered ``size_bytes`` record bytes of one ``topic``
        partition (followers' fetches are replication, not counted here, as Kafka)."""
        self.bytes_out[topic] = self.bytes_out.get(topic, 0) + size_bytes
        self.fetch_requests[topic] = self.fetch_requests.get(topic, 0) + 1

    def received(self, api_key: int, api_version: int, queue_ms: float) -> None:
        """A request of ``api_key`` v``api_version`` is handled after ``queue_ms`` waiting."""
        key = api_key << 16 | api_version
        requests = self.requests
        requests[key] = requests.get(key, 0) + 1
        histogram = self.queue_times.get(api_key)
        if histogram is None:
            histogram = self.queue_times[api_key] = MsHistogram(REQUEST_BUCKETS_MS)
        histogram.observe(queue_ms)

    def request_counts(self) -> dict[tuple[int, int], int]:
        """``{(api_key, api_version): requests received}``."""
        return {(key >> 16, key & 0xFFFF): count for key, count in list(self.requests.items())}

    def answered(self, api_key: int, total_ms: float) -> None:
        """A request of ``api_key`` was answered ``total_ms`` after it was read."""
        histogram = self.total_times.get(api_key)
        if histogram is None:
            histogram = self.total_times[api_key] = MsHistogram(REQUEST_BUCKETS_MS)
        histogram.observe(total_ms)
