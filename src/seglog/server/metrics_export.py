"""The broker's Prometheus endpoint (``seglog serve --metrics-listen HOST:PORT``,
``Broker(metrics_listen=...)``): Kafka's metrics under the names the Prometheus JMX
exporter's standard rules give Kafka's MBeans, plus kafka-exporter's consumer group series.
``docs/metrics.md`` lists every one (a test checks the page against :data:`METRICS`).

Each broker has its own ``prometheus_client`` :class:`CollectorRegistry` (not the global
one), so several brokers in one process do not clash. The HTTP server runs on a thread of
its own (prometheus_client's WSGI server). A scrape takes one snapshot on the broker's
event loop (a callback, no I/O: the counters of :mod:`seglog.server.metrics`, the logs'
views, the seam's partition states, the group coordinators), bounded by
:data:`SNAPSHOT_TIMEOUT_S`, so the figures of one scrape are consistent and nothing the
loop owns is read from another thread. The hot paths only add to counters; every gauge is
computed here, at scrape time.

A lone broker and a cluster member run the same code: a lone broker is a cluster of one
(leader of every partition, ISR = itself, its own active controller), so its cluster-only
figures read as Kafka's would for a one-broker cluster (0 under-replicated, 0 ISR changes).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterable, NamedTuple

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily, Metric)
from prometheus_client.registry import Collector, CollectorRegistry

from ..errors import SeglogError
from ..storage import counters as names
from ..storage.counters import MsHistogram
from ..types import TopicPartition
from .registry import api_name

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from .context import BrokerState

__all__ = ["METRICS", "MetricInfo", "MetricsExporter", "BrokerCollector", "metrics_table_markdown"]

log = logging.getLogger("seglog.server.metrics")

#: How long a scrape waits for the broker's loop to take its snapshot.
SNAPSHOT_TIMEOUT_S = 5.0
#: How often the event loop's idle ratio is sampled.
IDLE_SAMPLE_INTERVAL_S = 1.0
#: The ``state`` labels of Kafka's classic-, consumer-, share- and streams-group-count.
CLASSIC_GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
CONSUMER_GROUP_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")
SHARE_GROUP_STATES = ("Empty", "Stable", "Dead")
STREAMS_GROUP_STATES = ("Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead")


class MetricInfo(NamedTuple):
    """One metric served: ``name`` (as scraped; a counter's with ``_total``), ``kind``
    (counter, gauge, histogram), ``labels``, what it means, and Kafka's MBean it mirrors."""

    name: str
    kind: str
    labels: tuple[str, ...]
    help: str
    mbean: str


def _m(name: str, kind: str, labels: tuple[str, ...], help_text: str, mbean: str) -> MetricInfo:
    return MetricInfo(name, kind, labels, help_text, mbean)


_BTM = "kafka.server:type=BrokerTopicMetrics,name="
_RM = "kafka.server:type=ReplicaManager,name="
_REQ = "kafka.network:type=RequestMetrics,name="
_LOG = "kafka.log:type=Log,name="
_GC = "kafka.server:type=group-coordinator-metrics,"
_GMM = "kafka.coordinator.group:type=GroupMetadataManager,name="

#: Every metric the endpoint serves, in the order of docs/metrics.md.
METRICS: tuple[MetricInfo, ...] = (
    _m(names.MESSAGES_IN, "counter", ("topic",),
       "Records appended by Produce; the series without a topic label is all topics.",
       _BTM + "MessagesInPerSec[,topic=T]"),
    _m(names.BYTES_IN, "counter", ("topic",),
       "Record batch bytes appended by Produce (the batches as the clients sent them).",
       _BTM + "BytesInPerSec[,topic=T]"),
    _m(names.BYTES_OUT, "counter", ("topic",),
       "Record bytes answered to consumers' Fetch requests (replication not included).",
       _BTM + "BytesOutPerSec[,topic=T]"),
    _m("kafka_server_brokertopicmetrics_totalproducerequests_total", "counter", ("topic",),
       "Partitions appended to by Produce requests.",
       _BTM + "TotalProduceRequestsPerSec[,topic=T]"),
    _m("kafka_server_brokertopicmetrics_totalfetchrequests_total", "counter", ("topic",),
       "Partitions read by consumers' Fetch requests.",
       _BTM + "TotalFetchRequestsPerSec[,topic=T]"),
    _m("kafka_network_requestmetrics_requests_total", "counter", ("request", "version"),
       "Requests received, by API name and version.",
       _REQ + "RequestsPerSec,request=R,version=V"),
    _m("kafka_network_requestmetrics_totaltimems", "histogram", ("request",),
       "Time (ms) from a request's bytes being read to its response being ready.",
       _REQ + "TotalTimeMs,request=R"),
    _m("kafka_network_requestmetrics_requestqueuetimems", "histogram", ("request",),
       "Time (ms) a request waited between being read and being handled (pipelined "
       "requests behind back-pressure wait here).",
       _REQ + "RequestQueueTimeMs,request=R"),
    _m("kafka_network_socketserver_networkprocessoravgidlepercent", "gauge", (),
       "Share (0..1) of the last second the broker's event loop thread was idle (not on "
       "the CPU): the event-loop equivalent of Kafka's network processor idle ratio.",
       "kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent"),
    _m("kafka_server_replicamanager_leadercount", "gauge", (),
       "Partitions this broker leads.", _RM + "LeaderCount"),
    _m("kafka_server_replicamanager_partitioncount", "gauge", (),
       "Partitions this broker hosts a replica of.", _RM + "PartitionCount"),
    _m("kafka_server_replicamanager_underreplicatedpartitions", "gauge", (),
       "Partitions led here whose ISR is smaller than their replica list.",
       _RM + "UnderReplicatedPartitions"),
    _m("kafka_server_replicamanager_underminisrpartitioncount", "gauge", (),
       "Partitions led here whose ISR is smaller than min.insync.replicas.",
       _RM + "UnderMinIsrPartitionCount"),
    _m("kafka_server_replicamanager_isrshrinks_total", "counter", (),
       "ISR shrinks this broker wrote as a leader.", _RM + "IsrShrinksPerSec"),
    _m("kafka_server_replicamanager_isrexpands_total", "counter", (),
       "ISR expansions this broker wrote as a leader.", _RM + "IsrExpandsPerSec"),
    _m("kafka_controller_kafkacontroller_activecontrollercount", "gauge", (),
       "1 on the active controller (a lone broker is its own), else 0.",
       "kafka.controller:type=KafkaController,name=ActiveControllerCount"),
    _m("kafka_controller_kafkacontroller_offlinepartitionscount", "gauge", (),
       "Partitions without a live leader (reported by the active controller only; a lone "
       "broker: its partitions whose files failed to load).",
       "kafka.controller:type=KafkaController,name=OfflinePartitionsCount"),
    _m(names.LOG_FLUSH, "histogram", (),
       "Time (ms) of each log flush that synced anything (fsyncs of segments, indexes).",
       "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs"),
    _m(names.LOG_SIZE, "gauge", ("topic", "partition"),
       "Bytes of the partition's segment files.", _LOG + "Size,topic=T,partition=P"),
    _m(names.LOG_START_OFFSET, "gauge", ("topic", "partition"),
       "The partition's log start offset.", _LOG + "LogStartOffset,topic=T,partition=P"),
    _m(names.LOG_END_OFFSET, "gauge", ("topic", "partition"),
       "The partition's log end offset.", _LOG + "LogEndOffset,topic=T,partition=P"),
    _m(names.LOG_SEGMENTS, "gauge", ("topic", "partition"),
       "The partition's segments.", _LOG + "NumLogSegments,topic=T,partition=P"),
    _m("kafka_server_group_coordinator_metrics_group_count", "gauge", ("protocol",),
       "Groups coordinated here by protocol (classic, consumer, share, streams).",
       _GC + "protocol=P group-count"),
    _m("kafka_server_group_coordinator_metrics_classic_group_count", "gauge", ("state",),
       "Classic groups coordinated here by state.", _GC + "state=S classic-group-count"),
    _m("kafka_server_group_coordinator_metrics_consumer_group_count", "gauge", ("state",),
       "Consumer groups (KIP-848) coordinated here by state.",
       _GC + "state=S consumer-group-count"),
    _m("kafka_server_group_coordinator_metrics_share_group_count", "gauge", ("state",),
       "Share groups (KIP-932) coordinated here by state.", _GC + "state=S share-group-count"),
    _m("kafka_server_group_coordinator_metrics_streams_group_count", "gauge", ("state",),
       "Streams groups (KIP-1071) coordinated here by state.",
       _GC + "state=S streams-group-count"),
    _m("kafka_server_group_coordinator_metrics_group_completed_rebalance_count", "gauge",
       (), "Classic group rebalances completed (generations begun) here: a running count, "
       "a gauge under the JMX exporter's name of Kafka's cumulative sensor.",
       _GC + " group-completed-rebalance-count"),
    _m("kafka_coordinator_group_groupmetadatamanager_numgroups", "gauge", (),
       "Groups with committed offsets or members here.", _GMM + "NumGroups"),
    _m("kafka_coordinator_group_groupmetadatamanager_numoffsets", "gauge", (),
       "Committed offsets kept here.", _GMM + "NumOffsets"),
    _m("kafka_consumergroup_members", "gauge", ("consumergroup",),
       "Members of each group (kafka-exporter's series).", "(kafka-exporter)"),
    _m("kafka_consumergroup_current_offset", "gauge", ("consumergroup", "topic", "partition"),
       "Each group's committed offset per partition (kafka-exporter's series).",
       "(kafka-exporter)"),
    _m("kafka_consumergroup_lag", "gauge", ("consumergroup", "topic", "partition"),
       "High watermark minus committed offset (kafka-exporter's series).", "(kafka-exporter)"),
    _m("kafka_consumergroup_lag_sum", "gauge", ("consumergroup", "topic"),
       "Each group's lag summed over a topic's partitions (kafka-exporter's series).",
       "(kafka-exporter)"),
)

_INFO = {m.name: m for m in METRICS}


def metrics_table_markdown() -> str:
    """The Markdown table of :data:`METRICS` that ``docs/metrics.md`` carries (a test keeps
    them equal)."""
    lines = ["| Metric | Type | Labels | Meaning | Kafka's MBean |", "|---|---|---|---|---|"]
    for m in METRICS:
        labels = ", ".join(f"`{label}`" for label in m.labels) or "-"
        lines.append(f"| `{m.name}` | {m.kind} | {labels} | {m.help} | `{m.mbean}` |")
    return "\n".join(lines) + "\n"


def _family_name(name: str) -> str:
    """prometheus_client's counter families are named without ``_total`` (it adds it)."""
    return name[:-len("_total")] if name.endswith("_total") else name


def _counter(name: str) -> CounterMetricFamily:
    info = _INFO[name]
    return CounterMetricFamily(_family_name(name), info.help, labels=list(info.labels))


def _gauge(name: str) -> GaugeMetricFamily:
    info = _INFO[name]
    return GaugeMetricFamily(name, info.help, labels=list(info.labels))


def _histogram(name: str) -> HistogramMetricFamily:
    info = _INFO[name]
    return HistogramMetricFamily(name, info.help, labels=list(info.labels))


def _add_histogram(family: HistogramMetricFamily, labels: list[str],
                   histogram: MsHistogram) -> None:
    buckets = [(le, float(count)) for le, count in histogram.cumulative()]
    family.add_metric(labels, buckets, histogram.sum_ms)


def _per_topic(name: str, by_topic: dict[str, int]) -> CounterMetricFamily:
    """A BrokerTopicMetrics counter: one series per topic and the all-topics series
    (no topic label), as Kafka's MBeans with and without ``topic=``."""
    family = _counter(name)
    family.add_metric([], float(sum(by_topic.values())))
    for topic, value in sorted(by_topic.items()):
        family.add_metric([topic], float(value))
    return family


class BrokerCollector(Collector):
    """The collector of one broker (registered in its own registry): :meth:`collect` runs on
    the scraping thread and takes the snapshot on the broker's loop."""

    def __init__(self, state: BrokerState, *, controller_active: Callable[[], bool],
                 idle_ratio: Callable[[], float]):
        self.state = state
        self.controller_active = controller_active
        self.idle_ratio = idle_ratio

    def collect(self) -> Iterable[Metric]:
        """The metrics now (see the module docstring); none when the loop does not answer
        within :data:`SNAPSHOT_TIMEOUT_S` (the scrape then shows nothing rather than hang)."""
        loop = self.state.loop
        if loop.is_closed():
            return []
        done: concurrent.futures.Future[list[Metric]] = concurrent.futures.Future()

        def take() -> None:
            try:
                done.set_result(self.snapshot())
            except BaseException as exc:  # handed to the scraping thread
                done.set_exception(exc)

        try:
            loop.call_soon_threadsafe(take)
        except RuntimeError:  # the loop closed meanwhile
            return []
        try:
            return done.result(SNAPSHOT_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            log.warning("metrics: the broker's loop took no snapshot within %.0f s",
                        SNAPSHOT_TIMEOUT_S)
            return []

    def snapshot(self) -> list[Metric]:
        """Every metric family now; runs on the broker's event loop."""
        state = self.state
        counters = state.metrics
        by_topic = counters.by_topic()
        out: list[Metric] = [
            _per_topic(names.MESSAGES_IN, by_topic["messages_in"]),
            _per_topic(names.BYTES_IN, by_topic["bytes_in"]),
            _per_topic(names.BYTES_OUT, by_topic["bytes_out"]),
            _per_topic("kafka_server_brokertopicmetrics_totalproducerequests_total",
                       by_topic["produce_requests"]),
            _per_topic("kafka_server_brokertopicmetrics_totalfetchrequests_total",
                       by_topic["fetch_requests"]),
        ]
        requests = _counter("kafka_network_requestmetrics_requests_total")
        for (api_key, version), count in sorted(counters.request_counts().items()):
            requests.add_metric([api_name(api_key), str(version)], float(count))
        out.append(requests)
        for name, by_api in (("kafka_network_requestmetrics_totaltimems", counters.total_times),
                             ("kafka_network_requestmetrics_requestqueuetimems",
                              counters.queue_times)):
            family = _histogram(name)
            for api_key, histogram in sorted(by_api.items()):
                _add_histogram(family, [api_name(api_key)], histogram)
            out.append(family)
        idle = _gauge("kafka_network_socketserver_networkprocessoravgidlepercent")
        idle.add_metric([], self.idle_ratio())
        out.append(idle)
        out.extend(self._partitions())
        out.extend(self._logs())
        out.extend(self._groups())
        return out

    def _partitions(self) -> list[Metric]:
        """ReplicaManager's and the controller's partition gauges, from the seam."""
        state = self.state
        seam = state.cluster
        node_id = state.node_id
        assignments = seam.assignments
        states = seam.states
        leaders = hosted = under_replicated = under_min_isr = 0
        for name, assignment in assignments.items():
            try:
                min_isr = state.store.topic(name).config.min_insync_replicas
            except SeglogError:
                continue  # deleted meanwhile
            for partition, replicas in assignment.partitions.items():
                if node_id in replicas:
                    hosted += 1
                partition_state = states.get(TopicPartition(name, partition))
                if partition_state is None or partition_state.leader != node_id:
                    continue
                leaders += 1
                isr = len(partition_state.isr)
                under_replicated += isr < len(replicas)
                under_min_isr += isr < min_isr
        active = self.controller_active()
        offline = 0
        if active:
            live = seam.live_brokers
            offline = sum(1 for s in states.values() if s.leader < 0 or s.leader not in live)
            offline += len(state.store.offline_partitions())
        out: list[Metric] = []
        for name, value in (("kafka_server_replicamanager_leadercount", leaders),
                            ("kafka_server_replicamanager_partitioncount", hosted),
                            ("kafka_server_replicamanager_underreplicatedpartitions",
                             under_replicated),
                            ("kafka_server_replicamanager_underminisrpartitioncount",
                             under_min_isr),
                            ("kafka_controller_kafkacontroller_activecontrollercount",
                             int(active)),
                            ("kafka_controller_kafkacontroller_offlinepartitionscount",
                             offline)):
            gauge = _gauge(name)
            gauge.add_metric([], float(value))
            out.append(gauge)
        for name, attribute in (("kafka_server_replicamanager_isrshrinks_total", "isr_shrinks"),
                                ("kafka_server_replicamanager_isrexpands_total", "isr_expands")):
            counter = _counter(name)
            # A ReplicaManager counts its ISR writes; a lone broker's ISR never changes.
            counter.add_metric([], float(getattr(seam, attribute, 0)))
            out.append(counter)
        return out

    def _logs(self) -> list[Metric]:
        """Per-partition log gauges and the flush histogram, from the Logs' views."""
        store = self.state.store
        gauges = {name: _gauge(name) for name in (names.LOG_SIZE, names.LOG_START_OFFSET,
                                                  names.LOG_END_OFFSET, names.LOG_SEGMENTS)}
        flushes = MsHistogram()
        for topic_name in store.topics():
            try:
                topic = store.topic(topic_name)
            except SeglogError:
                continue
            for partition, log_ in topic.open_logs():
                figures = log_.metrics()
                labels = [topic_name, str(partition)]
                for name, gauge in gauges.items():
                    gauge.add_metric(labels, figures[name])
                flushes.add(log_.flush_times)
        flush_family = _histogram(names.LOG_FLUSH)
        _add_histogram(flush_family, [], flushes)
        return [*gauges.values(), flush_family]

    def _groups(self) -> list[Metric]:
        """The group coordinators' gauges and kafka-exporter's per-group series."""
        from .apis.groups import find_groups_state  # the handler module owns its state

        store = self.state.store
        group_count = _gauge("kafka_server_group_coordinator_metrics_group_count")
        classic_count = _gauge("kafka_server_group_coordinator_metrics_classic_group_count")
        consumer_count = _gauge("kafka_server_group_coordinator_metrics_consumer_group_count")
        share_count = _gauge("kafka_server_group_coordinator_metrics_share_group_count")
        streams_count = _gauge("kafka_server_group_coordinator_metrics_streams_group_count")
        rebalances = _gauge(
            "kafka_server_group_coordinator_metrics_group_completed_rebalance_count")
        members = _gauge("kafka_consumergroup_members")
        groups_state = find_groups_state(self.state)
        member_counts: dict[str, int] = {}
        # Every state Kafka reports, 0 when no group is in it (as Kafka's gauges).
        classic_states = dict.fromkeys(CLASSIC_GROUP_STATES, 0)
        consumer_states = dict.fromkeys(CONSUMER_GROUP_STATES, 0)
        other_states = {"share": dict.fromkeys(SHARE_GROUP_STATES, 0),
                        "streams": dict.fromkeys(STREAMS_GROUP_STATES, 0)}
        if groups_state is not None:
            coordinator = groups_state.coordinator
            rebalances.add_metric([], float(coordinator.completed_rebalances))
            for group_id in coordinator.group_ids():
                description = coordinator.describe(group_id)
                if description is None:
                    continue
                classic_states[description.state] = classic_states.get(description.state,
                                                                        0) + 1
                member_counts[group_id] = len(description.members)
            consumer = groups_state.consumer
            if consumer is not None:
                for group_id in consumer.group_ids():
                    group = consumer.group(group_id)
                    group_state = consumer.state(group_id) or "Empty"
                    consumer_states[group_state] = consumer_states.get(group_state, 0) + 1
                    member_counts[group_id] = 0 if group is None else len(group.members)
            # Share and streams groups: their handler modules register a GroupType here.
            for group_type in groups_state.group_types:
                states = other_states.get(group_type.group_type)
                if states is None:
                    continue
                for _group_id, group_state in group_type.listed_groups():
                    states[group_state] = states.get(group_state, 0) + 1
        else:
            rebalances.add_metric([], 0.0)
        per_protocol = {"classic": classic_states, "consumer": consumer_states, **other_states}
        for protocol, states in per_protocol.items():
            group_count.add_metric([protocol], float(sum(states.values())))
        for family, states in ((classic_count, classic_states),
                               (consumer_count, consumer_states),
                               (share_count, other_states["share"]),
                               (streams_count, other_states["streams"])):
            for state_name, count in states.items():
                family.add_metric([state_name], float(count))
        current = _gauge("kafka_consumergroup_current_offset")
        lag = _gauge("kafka_consumergroup_lag")
        lag_sum = _gauge("kafka_consumergroup_lag_sum")
        offsets = 0
        try:
            offset_groups = store.groups()
        except SeglogError:
            offset_groups = []
        for group_id in offset_groups:
            member_counts.setdefault(group_id, 0)
            try:
                committed = store.group(group_id).committed_offsets()
            except SeglogError:
                continue
            sums: dict[str, int] = {}
            for tp, om in sorted(committed.items()):
                offsets += 1
                labels = [group_id, tp.topic, str(tp.partition)]
                current.add_metric(labels, float(om.offset))
                try:
                    behind = max(0, store.log((tp.topic, tp.partition)).high_watermark
                                 - om.offset)
                except SeglogError:
                    continue  # the topic is gone, or its partition is offline
                lag.add_metric(labels, float(behind))
                sums[tp.topic] = sums.get(tp.topic, 0) + behind
            for topic, total in sorted(sums.items()):
                lag_sum.add_metric([group_id, topic], float(total))
        for group_id, count in sorted(member_counts.items()):
            members.add_metric([group_id], float(count))
        num_groups = _gauge("kafka_coordinator_group_groupmetadatamanager_numgroups")
        num_groups.add_metric([], float(len(member_counts)))
        num_offsets = _gauge("kafka_coordinator_group_groupmetadatamanager_numoffsets")
        num_offsets.add_metric([], float(offsets))
        return [group_count, classic_count, consumer_count, share_count, streams_count,
                rebalances, num_groups,
                num_offsets, members, current, lag, lag_sum]


class IdleSampler:
    """The event loop's idle ratio: every :data:`IDLE_SAMPLE_INTERVAL_S`, one minus the CPU
    time the loop's thread used over the wall time passed (``time.thread_time``, read on the
    loop's thread). Runs as a task on the broker's loop."""

    def __init__(self) -> None:
        self.ratio = 1.0
        self._task: asyncio.Task[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Begin sampling on ``loop`` (called on it)."""
        self._task = loop.create_task(self._run(), name="seglog-metrics-idle")

    async def _run(self) -> None:
        wall_s, cpu_s = time.monotonic(), time.thread_time()
        while True:
            await asyncio.sleep(IDLE_SAMPLE_INTERVAL_S)
            now_wall_s, now_cpu_s = time.monotonic(), time.thread_time()
            elapsed_s = now_wall_s - wall_s
            if elapsed_s > 0:
                busy = (now_cpu_s - cpu_s) / elapsed_s
                self.ratio = min(1.0, max(0.0, 1.0 - busy))
            wall_s, cpu_s = now_wall_s, now_cpu_s

    async def stop(self) -> None:
        """Stop sampling (on the loop)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass


class MetricsExporter:
    """One broker's Prometheus endpoint: its registry, the HTTP server thread and the idle
    sampler. :meth:`start` on the broker's loop once its state exists; :meth:`stop` before
    the Store closes."""

    def __init__(self, state: BrokerState, host: str, port: int, *,
                 controller_active: Callable[[], bool]):
        self.registry = CollectorRegistry(auto_describe=False)
        self._sampler = IdleSampler()
        self.collector = BrokerCollector(state, controller_active=controller_active,
                                         idle_ratio=lambda: self._sampler.ratio)
        self.registry.register(self.collector)
        self._state = state
        self._host = host
        self._port = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        #: ``(host, port)`` bound (the port picked when asked for 0), once started.
        self.address: tuple[str, int] | None = None

    def start(self) -> tuple[str, int]:
        """Bind and serve ``/metrics`` on a thread of its own; returns the bound address.
        OSError when the address is in use."""
        from prometheus_client import start_http_server

        self._sampler.start(self._state.loop)
        server, thread = start_http_server(self._port, addr=self._host, registry=self.registry)
        thread.name = "seglog-metrics-http"
        self._server, self._thread = server, thread
        bound = server.server_address
        self.address = (str(bound[0]), int(bound[1]))
        log.debug("metrics on http://%s:%d/metrics", *self.address)
        return self.address

    async def stop(self) -> None:
        """Stop serving (joins the HTTP thread off the loop) and the sampler."""
        await self._sampler.stop()
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return

        def shut() -> None:
            server.shutdown()
            server.server_close()
            if thread is not None:
                thread.join(SNAPSHOT_TIMEOUT_S + 1)

        await asyncio.get_running_loop().run_in_executor(None, shut)
