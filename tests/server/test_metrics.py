"""The broker's Prometheus endpoint (``--metrics-listen``, docs/metrics.md): a real client
(confluent-kafka) produces known records to two topics and consumes them with a group; the
scraped figures must match what the test did and what is on disk. Also: ``seglog serve`` as
a subprocess serves the same, two in-process brokers keep their own registries, the docs
page lists exactly the metrics served, and the Grafana dashboard names only metrics that
exist."""

from __future__ import annotations

import json
import os
import pathlib
import re
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from seglog.server.broker import Broker
from seglog.server.metrics_export import METRICS, metrics_table_markdown

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
TIMEOUT_S = 30.0

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(address: tuple[str, int]) -> Samples:
    """Every sample of ``http://host:port/metrics`` by (name, labels)."""
    with urllib.request.urlopen("http://%s:%d/metrics" % address, timeout=TIMEOUT_S) as reply:
        assert reply.status == 200
        text = reply.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name{labels}`` (KeyError when absent)."""
    return samples[(name, frozenset(labels.items()))]


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def log_bytes_on_disk(data_dir: pathlib.Path, topic: str) -> int:
    """Bytes of the ``.log`` files of every partition directory of ``topic``."""
    pattern = re.compile(re.escape(topic) + r"-\d+$")
    return sum(f.stat().st_size for d in data_dir.iterdir() if pattern.match(d.name)
               for f in d.glob("*.log"))


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(TIMEOUT_S) == 0


def consume_all(consumer: Consumer, count: int) -> int:
    """Poll until ``count`` records arrived (bounded); returns how many did."""
    got = 0
    deadline = time.monotonic() + TIMEOUT_S
    while got < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got += 1
    return got


def test_figures_match_what_a_real_client_did(tmp_path):
    data_dir = tmp_path / "data"
    with Broker(data_dir, listen=("127.0.0.1", 0),
                metrics_listen=("127.0.0.1", 0)) as broker:
        assert broker.metrics_address is not None and broker.metrics_address[1] > 0
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("metrics-a", 2, 1),
                                           NewTopic("metrics-b", 1, 1)]).values():
            future.result(TIMEOUT_S)
        a_values = [b"a" * (10 + i) for i in range(40)]
        b_values = [b"b" * 100 for _ in range(25)]
        produce(bootstrap, "metrics-a", a_values)
        produce(bootstrap, "metrics-b", b_values)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "metrics-group",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.subscribe(["metrics-a", "metrics-b"])
            assert consume_all(consumer, 65) == 65
            consumer.commit(asynchronous=False)
            produce(bootstrap, "metrics-b", [b"late"] * 5)  # lag 5 on metrics-b
            committed = consumer.committed([TopicPartition("metrics-b", 0)], timeout=TIMEOUT_S)
            assert committed[0].offset == 25
            samples = scrape(broker.metrics_address)
        finally:
            consumer.close()
        # The LeaveGroup the close sent may be answered after close() returned: bounded wait.
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            after_leave = scrape(broker.metrics_address)
            if after_leave.get(("kafka_consumergroup_members",
                                frozenset({("consumergroup", "metrics-group")}))) == 0 \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.1)

    messages_in = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(samples, messages_in, topic="metrics-a") == 40
    assert value(samples, messages_in, topic="metrics-b") == 30
    assert value(samples, messages_in) == 70  # the all-topics series
    # Bytes in are the batches appended: exactly the segment files' bytes (no compaction,
    # no retention here), which the log size gauges report too.
    bytes_in = "kafka_server_brokertopicmetrics_bytesin_total"
    for topic in ("metrics-a", "metrics-b"):
        on_disk = log_bytes_on_disk(data_dir, topic)
        assert on_disk > 0
        assert value(samples, bytes_in, topic=topic) == on_disk
        assert total(samples, "kafka_log_log_size", topic=topic) == on_disk
        # The consumer read every batch at least once (the 5 late records perhaps not yet).
        assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total",
                     topic=topic) >= (on_disk if topic == "metrics-a" else 1)
    assert value(samples, bytes_in) >= sum(len(v) for v in a_values + b_values)
    assert value(samples, "kafka_log_log_logendoffset", topic="metrics-a", partition="0") \
        + value(samples, "kafka_log_log_logendoffset", topic="metrics-a", partition="1") == 40
    assert value(samples, "kafka_log_log_logendoffset", topic="metrics-b", partition="0") == 30

    requests = "kafka_network_requestmetrics_requests_total"
    assert total(samples, requests, request="Produce") >= 3  # three producers flushed
    assert total(samples, requests, request="Fetch") >= 1
    assert total(samples, requests, request="OffsetCommit") >= 1
    assert total(samples, requests, request="CreateTopics") >= 1
    assert total(samples, requests, request="ApiVersions") >= 5
    # Every Produce was answered (acks=all): one total-time observation each.
    assert value(samples, "kafka_network_requestmetrics_totaltimems_count",
                 request="Produce") == total(samples, requests, request="Produce")
    assert value(samples, "kafka_network_requestmetrics_requestqueuetimems_count",
                 request="CreateTopics") == total(samples, requests, request="CreateTopics")
    idle = value(samples, "kafka_network_socketserver_networkprocessoravgidlepercent")
    assert 0.0 <= idle <= 1.0

    # A lone broker is a one-broker cluster: leader of everything, its own controller.
    partitions = value(samples, "kafka_server_replicamanager_partitioncount")
    assert partitions >= 3 + 1  # the two topics and __consumer_offsets' partitions
    assert value(samples, "kafka_server_replicamanager_leadercount") == partitions
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert value(samples, "kafka_server_replicamanager_isrshrinks_total") == 0
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0

    # The group as committed: offsets at the ends read, lag 5 on metrics-b, one member.
    group = "metrics-group"
    assert value(samples, "kafka_consumergroup_members", consumergroup=group) == 1
    assert total(samples, "kafka_consumergroup_current_offset", consumergroup=group,
                 topic="metrics-a") == 40
    assert value(samples, "kafka_consumergroup_current_offset", consumergroup=group,
                 topic="metrics-b", partition="0") == 25
    assert value(samples, "kafka_consumergroup_lag", consumergroup=group, topic="metrics-b",
                 partition="0") == 5
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup=group,
                 topic="metrics-a") == 0
    assert value(samples, "kafka_server_group_coordinator_metrics_group_count",
                 protocol="classic") == 1
    assert value(samples, "kafka_server_group_coordinator_metrics_classic_group_count",
                 state="Stable") == 1
    assert value(samples,
                 "kafka_server_group_coordinator_metrics_group_completed_rebalance_count") >= 1
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == 3
    # The member left with close(): none now, the committed offsets stay.
    assert value(after_leave, "kafka_consumergroup_members", consumergroup=group) == 0
    assert value(after_leave, "kafka_consumergroup_lag", consumergroup=group,
                 topic="metrics-b", partition="0") == 5


def test_share_groups_are_counted_by_state(tmp_path):
    """A share group (confluent-kafka's ShareConsumer) is counted in group-count
    (protocol=share) and share-group-count by its state: Stable with a member reading, Empty
    once it left; streams groups are listed with every state at 0."""
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)

    topic, group = "metrics-share", "metrics-share-group"
    with Broker(tmp_path / "data", listen=("127.0.0.1", 0),
                metrics_listen=("127.0.0.1", 0)) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
        for future in admin.incremental_alter_configs([ConfigResource(
                ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                    "share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])]).values():
            future.result(TIMEOUT_S)
        produce(broker.bootstrap, topic, [b"s"] * 3)
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        try:
            consumer.subscribe([topic])
            got = 0
            deadline = time.monotonic() + TIMEOUT_S
            while got < 3 and time.monotonic() < deadline:
                got += sum(1 for m in consumer.poll(0.2) if m.error() is None)
            assert got == 3
            live = scrape(broker.metrics_address)
        finally:
            consumer.close()
        deadline = time.monotonic() + TIMEOUT_S
        left = scrape(broker.metrics_address)
        share_count = "kafka_server_group_coordinator_metrics_share_group_count"
        while value(left, share_count, state="Empty") != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
            left = scrape(broker.metrics_address)
    group_count = "kafka_server_group_coordinator_metrics_group_count"
    assert value(live, group_count, protocol="share") == 1
    assert value(live, share_count, state="Stable") == 1
    assert value(live, share_count, state="Empty") == 0
    assert value(left, share_count, state="Empty") == 1
    assert value(left, group_count, protocol="share") == 1
    assert value(live, group_count, protocol="streams") == 0
    streams = {dict(labels)["state"] for name, labels in live
               if name == "kafka_server_group_coordinator_metrics_streams_group_count"}
    assert streams == {"Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead"}


def test_two_brokers_in_one_process_keep_their_own_figures(tmp_path):
    with Broker(tmp_path / "one", listen=("127.0.0.1", 0),
                metrics_listen=("127.0.0.1", 0)) as one, \
            Broker(tmp_path / "two", listen=("127.0.0.1", 0),
                   metrics_listen="127.0.0.1:0") as two:
        assert one.metrics_address != two.metrics_address
        produce(one.bootstrap, "metrics-one", [b"x"] * 7)
        first, second = scrape(one.metrics_address), scrape(two.metrics_address)
    messages_in = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(first, messages_in, topic="metrics-one") == 7
    assert value(second, messages_in) == 0
    assert (messages_in, frozenset({("topic", "metrics-one")})) not in second


def test_a_broker_without_metrics_listen_serves_none(tmp_path):
    with Broker(tmp_path / "d", listen=("127.0.0.1", 0)) as broker:
        assert broker.metrics_address is None


SERVE_METRICS = re.compile(r"seglog serve metrics on http://127\.0\.0\.1:(\d+)/metrics")
SERVE_LISTENING = re.compile(r"seglog serve listening on 127\.0\.0\.1:(\d+) ")


def test_seglog_serve_with_metrics_listen(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    data_dir = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "seglog", "serve", "--data-dir", str(data_dir),
         "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
        text=True)
    lines: queue.Queue[str] = queue.Queue()

    def read_lines() -> None:  # the subprocess's output, line by line, until it ends
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=read_lines, daemon=True).start()
    try:
        seen: list[str] = []
        port = metrics_port = None
        deadline = time.monotonic() + 60
        while (port is None or metrics_port is None) and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            seen.append(line)
            if (match := SERVE_LISTENING.search(line)) is not None:
                port = int(match.group(1))
            if (match := SERVE_METRICS.search(line)) is not None:
                metrics_port = int(match.group(1))
        assert port is not None and metrics_port is not None, "".join(seen)
        produce(f"127.0.0.1:{port}", "metrics-serve", [b"v" * 50] * 12)
        samples = scrape(("127.0.0.1", metrics_port))
        assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total",
                     topic="metrics-serve") == 12
        assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total",
                     topic="metrics-serve") == log_bytes_on_disk(data_dir, "metrics-serve")
        assert total(samples, "kafka_network_requestmetrics_requests_total",
                     request="Produce") >= 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise
    assert proc.returncode == 0


def test_every_metric_served_is_documented_and_every_documented_one_is_served(tmp_path):
    page = (ROOT / "docs" / "metrics.md").read_text()
    assert metrics_table_markdown() in page, (
        "docs/metrics.md's table is stale: paste "
        "seglog.server.metrics_export.metrics_table_markdown() into it")
    with Broker(tmp_path / "d", listen=("127.0.0.1", 0),
                metrics_listen=("127.0.0.1", 0)) as broker:
        produce(broker.bootstrap, "metrics-doc", [b"x"])
        with urllib.request.urlopen("http://%s:%d/metrics" % broker.metrics_address,
                                    timeout=TIMEOUT_S) as reply:
            text = reply.read().decode()
    served = {f.name for f in text_string_to_metric_families(text)}
    documented = {m.name[:-len("_total")] if m.kind == "counter" else m.name for m in METRICS}
    assert served == documented


def _dashboard_metric_names(expr: str) -> set[str]:
    """The metric names an expression names (identifiers starting with ``kafka_``)."""
    return set(re.findall(r"\bkafka_[a-z0-9_]+", expr))


def test_the_grafana_dashboard_names_only_metrics_that_exist():
    dashboard = json.loads((ROOT / "docs" / "grafana" / "seglog.json").read_text())
    known: set[str] = set()
    for m in METRICS:
        known.add(m.name)
        if m.kind == "histogram":
            known.update({m.name + "_bucket", m.name + "_count", m.name + "_sum"})
    exprs = [target["expr"] for panel in dashboard["panels"]
             for target in panel.get("targets", ())]
    assert len(exprs) >= 8
    named = set().union(*(_dashboard_metric_names(e) for e in exprs))
    assert named, "the dashboard names no metric"
    assert named <= known, sorted(named - known)
    # The main ones are shown.
    for wanted in ("kafka_server_brokertopicmetrics_messagesin_total",
                   "kafka_server_brokertopicmetrics_bytesin_total",
                   "kafka_server_brokertopicmetrics_bytesout_total",
                   "kafka_network_requestmetrics_requests_total",
                   "kafka_network_requestmetrics_totaltimems_bucket",
                   "kafka_server_replicamanager_underreplicatedpartitions",
                   "kafka_consumergroup_lag"):
        assert wanted in named, wanted


@pytest.mark.parametrize("bad", ["nohost", "127.0.0.1:99999"])
def test_a_bad_metrics_listen_is_refused(tmp_path, bad):
    from seglog.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError):
        Broker(tmp_path / "d", listen=("127.0.0.1", 0), metrics_listen=bad)


def test_a_metrics_port_in_use_fails_the_start_and_leaves_the_data_dir_free(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = Broker(tmp_path / "d", listen=("127.0.0.1", 0),
                        metrics_listen=("127.0.0.1", port))
        with pytest.raises(OSError):
            broker.start()
    # The failed start closed its Store: another broker opens the directory at once.
    with Broker(tmp_path / "d", listen=("127.0.0.1", 0),
                metrics_listen=("127.0.0.1", 0)) as again:
        assert again.metrics_address is not None
