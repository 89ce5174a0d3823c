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

    __slots__ = ("topics_in", "topics_out", "requests", "total_times", "queue_times")

    def __init__(self) -> None:
        #: ``{topic: [records, batch bytes, partitions appended]}`` by Produce
        #: (MessagesInPerSec, BytesInPerSec, TotalProduceRequestsPerSec): see :meth:`by_topic`.
        self.topics_in: dict[str, list[int]] = {}
        #: ``{topic: [record bytes, partitions read]}`` by consumers' Fetch (BytesOutPerSec,
        #: TotalFetchRequestsPerSec).
        self.topics_out: dict[str, list[int]] = {}
        #: ``{api_key << 16 | api_version: requests}`` (RequestsPerSec; an int key, cheaper
        #: than a tuple on every request): see :meth:`request_counts`.
        self.requests: dict[int, int] = {}
        #: ``{api_key: MsHistogram}``: received to answered (TotalTimeMs).
        self.total_times: dict[int, MsHistogram] = {}
        #: ``{api_key: MsHistogram}``: read from the socket to handled (RequestQueueTimeMs).
        self.queue_times: dict[int, MsHistogram] = {}

    def appended(self, topic: str, records: int, size_bytes: int) -> None:
        """Produce appended ``records`` records in ``size_bytes`` bytes to ``topic``."""
        figures = self.topics_in.get(topic)
        if figures is None:
            figures = self.topics_in[topic] = [0, 0, 0]
        figures[0] += records
        figures[1] += size_bytes
        figures[2] += 1

    def sent(self, topic: str, size_bytes: int) -> None:
        """A consumer's Fetch answered ``size_bytes`` record bytes of one ``topic``
        partition (followers' fetches are replication, not counted here, as Kafka)."""
        figures = self.topics_out.get(topic)
        if figures is None:
            figures = self.topics_out[topic] = [0, 0]
        figures[0] += size_bytes
        figures[1] += 1

    def by_topic(self) -> dict[str, dict[str, int]]:
        """``{figure: {topic: value}}`` for ``messages_in``, ``bytes_in``,
        ``produce_requests``, ``bytes_out`` and ``fetch_requests`` (a copy)."""
        topics_in = list(self.topics_in.items())
        topics_out = list(self.topics_out.items())
        out: dict[str, dict[str, int]] = {}
        for index, figure in enumerate(("messages_in", "bytes_in", "produce_requests")):
            out[figure] = {topic: figures[index] for topic, figures in topics_in}
        for index, figure in enumerate(("bytes_out", "fetch_requests")):
            out[figure] = {topic: figures[index] for topic, figures in topics_out}
        return out

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
