"""The metric names and figures against real Kafka 4.4 (docs/metrics.md): the same client
work on both brokers (a topic, known records produced, consumed by a group and committed),
then Kafka's MBeans are read over JMX (a JMX agent started in the running broker with
``jcmd``, Kafka's own ``JmxTool``), named by the Prometheus JMX exporter's standard Kafka
rules (:func:`exporter_name`), and compared with seglog's endpoint: every metric seglog
serves under a Kafka MBean's name exists in Kafka under that name, and the figures the test
controls are equal (records in per topic, log end offset, Produce and Fetch request
versions, a lone broker's replication gauges)."""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from seglog.server.broker import Broker
from seglog.server.metrics_export import METRICS

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

TOPIC = "test_metrics_differential"
GROUP = "test_metrics_differential-group"
RECORDS = 60
TIMEOUT_S = 30.0

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

#: The JMX agent's port per Kafka broker pid (an agent starts once per JVM).
_JMX_PORTS: dict[int, int] = {}


def exporter_name(mbean: str, attribute: str) -> tuple[str, dict[str, str]] | None:
    """``(name, labels)`` of ``mbean``'s ``attribute`` under the JMX exporter's standard Kafka
    rules (lowercased; a meter's ``Count``: ``_total`` without ``PerSec``; a timer's or
    histogram's ``Count``: ``_count``; a gauge's ``Value``: the plain name; a Kafka
    ``Metrics`` attribute of an MBean without ``name=``: the attribute's name), None for
    the attributes the rules leave out (rates, percentiles)."""
    domain, _, props_text = mbean.partition(":")
    props = dict(p.split("=", 1) for p in props_text.split(","))
    kind = props.pop("type")
    name = props.pop("name", None)
    prefix = "_".join([domain.replace(".", "_"), kind])
    if name is None:
        metric = f"{prefix}_{attribute}"
    elif attribute == "Value":
        metric = f"{prefix}_{name}"
    elif attribute == "Count":
        metric = (f"{prefix}_{name[:-len('PerSec')]}_total" if name.endswith("PerSec")
                  else f"{prefix}_{name}_count")
    else:
        return None
    return re.sub(r"[^a-z0-9_]", "_", metric.lower()), props


def kafka_samples(kafka) -> Samples:
    """Every Kafka MBean attribute the exporter's rules name, read once over JMX."""
    pid = kafka.pid
    assert pid is not None
    port = _JMX_PORTS.get(pid)
    if port is None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        started = subprocess.run(
            ["jcmd", str(pid), "ManagementAgent.start", f"jmxremote.port={port}",
             f"jmxremote.rmi.port={port}", "jmxremote.authenticate=false",
             "jmxremote.ssl=false", "jmxremote.host=127.0.0.1"],
            capture_output=True, text=True, timeout=60, check=False)
        if started.returncode != 0:
            pytest.skip(f"cannot start a JMX agent in the Kafka broker: {started.stderr}")
        _JMX_PORTS[pid] = port
    queries = ["kafka.server:type=BrokerTopicMetrics,*", "kafka.server:type=ReplicaManager,*",
               "kafka.controller:type=KafkaController,*", "kafka.log:*",
               "kafka.network:type=SocketServer,*", "kafka.network:type=RequestMetrics,*",
               "kafka.server:type=group-coordinator-metrics,*", "kafka.coordinator.group:*"]
    args = ["--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi",
            "--one-time", "true", "--report-format", "properties"]
    for query in queries:
        args += ["--object-name", query]
    ran = kafka.ref.run_tool("org.apache.kafka.tools.JmxTool", args,
                             run_dir=kafka.run_dir / "jmxtool", timeout_s=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    samples: Samples = {}
    for line in ran.stdout.splitlines():
        match = re.match(r"(kafka[\w.]*:[^:]+):([\w-]+)=(.*)$", line)
        if match is None:
            continue
        named = exporter_name(match.group(1), match.group(2))
        try:
            number = float(match.group(3))
        except ValueError:
            continue
        if named is not None:
            samples[(named[0], frozenset(named[1].items()))] = number
    return samples


def seglog_samples(broker: Broker) -> Samples:
    assert broker.metrics_address is not None
    with urllib.request.urlopen("http://%s:%d/metrics" % broker.metrics_address,
                                timeout=TIMEOUT_S) as reply:
        text = reply.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def exercise(bootstrap: str) -> None:
    """The same client work on either broker."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, b"m" * (i % 17 + 1))
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        got = 0
        deadline = time.monotonic() + TIMEOUT_S
        while got < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        assert got == RECORDS
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def names_of(samples: Samples) -> set[str]:
    return {name for name, _labels in samples}


def versions_of(samples: Samples, request: str) -> set[str]:
    return {dict(labels)["version"] for name, labels in samples
            if name == "kafka_network_requestmetrics_requests_total"
            and dict(labels).get("request") == request}


def test_names_and_figures_equal_kafkas(kafka_shared_groups, tmp_path):
    exercise(kafka_shared_groups.bootstrap)
    kafka = kafka_samples(kafka_shared_groups)
    with Broker(tmp_path / "seglog", listen=("127.0.0.1", 0),
                metrics_listen=("127.0.0.1", 0),
                config={"group.initial.rebalance.delay.ms": 0,
                        "offsets.topic.num.partitions": 1}) as broker:
        exercise(broker.bootstrap)
        ours = seglog_samples(broker)

    # Every name seglog serves for a Kafka MBean is Kafka's (through the exporter's rules).
    kafka_names = names_of(kafka)
    for metric in METRICS:
        if metric.mbean.startswith("("):
            continue  # kafka-exporter's series, not a Kafka MBean
        name = metric.name + "_count" if metric.kind == "histogram" else metric.name
        assert name in kafka_names, f"{name} ({metric.mbean}) is not a Kafka 4.4 metric"

    # The group gauges have Kafka's label values (every state, 0 when empty).
    for name in ("kafka_server_group_coordinator_metrics_classic_group_count",
                 "kafka_server_group_coordinator_metrics_consumer_group_count",
                 "kafka_server_group_coordinator_metrics_share_group_count",
                 "kafka_server_group_coordinator_metrics_streams_group_count"):
        labels = {labels for n, labels in ours if n == name}
        assert labels and labels <= {labels for n, labels in kafka if n == name}, name

    # The figures the test controls are equal.
    topic = frozenset({("topic", TOPIC)})
    for name in ("kafka_server_brokertopicmetrics_messagesin_total",):
        assert ours[(name, topic)] == kafka[(name, topic)] == RECORDS
    partition = frozenset({("topic", TOPIC), ("partition", "0")})
    assert ours[("kafka_log_log_logendoffset", partition)] \
        == kafka[("kafka_log_log_logendoffset", partition)] == RECORDS
    assert ours[("kafka_log_log_numlogsegments", partition)] \
        == kafka[("kafka_log_log_numlogsegments", partition)] == 1
    # Each side's bytes in are its log's bytes (the batches as the client sent them).
    for side in (ours, kafka):
        assert side[("kafka_server_brokertopicmetrics_bytesin_total", topic)] \
            == side[("kafka_log_log_size", partition)]
    # The client negotiated the same versions with both.
    for request in ("Produce", "Fetch", "OffsetCommit", "JoinGroup", "CreateTopics"):
        assert versions_of(ours, request) and \
            versions_of(ours, request) <= versions_of(kafka, request), request
    # A one-broker cluster's replication gauges.
    for name, expected in (("kafka_server_replicamanager_underreplicatedpartitions", 0),
                           ("kafka_server_replicamanager_underminisrpartitioncount", 0),
                           ("kafka_controller_kafkacontroller_activecontrollercount", 1),
                           ("kafka_controller_kafkacontroller_offlinepartitionscount", 0)):
        assert ours[(name, frozenset())] == kafka[(name, frozenset())] == expected, name
    for side in (ours, kafka):
        assert side[("kafka_server_replicamanager_leadercount", frozenset())] \
            == side[("kafka_server_replicamanager_partitioncount", frozenset())]
