"""The Prometheus endpoint of cluster members (docs/metrics.md): the same code as a lone
broker's, with the replication figures a cluster has. Three in-process brokers over the
session's ZooKeeper, a topic of replication factor 3: every replica in sync (0
under-replicated, one active controller, one leader per partition across the brokers); a
follower stopped: its leader reports the partition under-replicated (and under min ISR);
the follower back: the leader's ISR expansion counted and 0 under-replicated again."""

from __future__ import annotations

import urllib.request

import seglog
from prometheus_client.parser import text_string_to_metric_families
from seglog.types import TopicPartition

from test_broker_cluster import Cluster, create_topic, wait_until

TOPIC = "metrics-replicated"


class MetricsCluster(Cluster):
    """:class:`Cluster` whose brokers serve metrics on free ports."""

    def start(self, broker_id: int, zk_connect: str | None = None) -> seglog.Broker:
        broker = seglog.Broker(self.tmp_path / f"broker-{broker_id}", listen=("127.0.0.1", 0),
                               config=dict(self.config, **{
                                   "broker.id": broker_id,
                                   "zookeeper.connect": zk_connect or self.zk_connect}),
                               backend=self.backend, test_breaks=self.test_breaks,
                               metrics_listen=("127.0.0.1", 0))
        broker.start()
        self.brokers[broker_id] = broker
        return broker


def figure(broker: seglog.Broker, name: str) -> float:
    """The unlabelled sample ``name`` scraped from ``broker``'s endpoint."""
    assert broker.metrics_address is not None
    with urllib.request.urlopen("http://%s:%d/metrics" % broker.metrics_address,
                                timeout=20) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return sample.value
    raise KeyError(name)


def test_replication_figures_follow_the_isr(tmp_path, zk_connect):
    cluster = MetricsCluster(tmp_path, zk_connect)
    try:
        wait_until(lambda: all(len(cluster.rm(b).live_brokers) == 3 for b in cluster.brokers),
                   "every broker to see three live brokers")
        create_topic(cluster, TOPIC, partitions=2, replication_factor=3,
                     config={"min.insync.replicas": "3"})
        tp = TopicPartition(TOPIC, 0)
        leader = cluster.wait_for_isr(tp, 3)
        cluster.wait_for_isr(TopicPartition(TOPIC, 1), 3)
        brokers = cluster.brokers
        assert sum(figure(b, "kafka_controller_kafkacontroller_activecontrollercount")
                   for b in brokers.values()) == 1
        assert sum(figure(b, "kafka_server_replicamanager_leadercount")
                   for b in brokers.values()) == 2
        assert all(figure(b, "kafka_server_replicamanager_partitioncount") == 2
                   for b in brokers.values())
        assert all(figure(b, "kafka_server_replicamanager_underreplicatedpartitions") == 0
                   for b in brokers.values())
        follower = next(b for b in brokers if b != leader)
        cluster.stop(follower)
        cluster.wait_for_isr(tp, 2)
        leading = brokers[leader]
        # The controller took the stopped broker out of the ISR (ZooKeeper mode): no shrink
        # of the leader's own, as Kafka counts; the partition is under-replicated there.
        wait_until(lambda: figure(
            leading, "kafka_server_replicamanager_underreplicatedpartitions") >= 1,
            "the leader to report the partition under-replicated")
        # min.insync.replicas=3 with an ISR of 2: under min ISR as well.
        assert figure(leading, "kafka_server_replicamanager_underminisrpartitioncount") >= 1
        cluster.start(follower)
        cluster.wait_for_isr(tp, 3)
        wait_until(lambda: figure(leading, "kafka_server_replicamanager_isrexpands_total") >= 1,
                   "the leader to count its ISR expansion")
        wait_until(lambda: all(
            figure(b, "kafka_server_replicamanager_underreplicatedpartitions") == 0
            for b in cluster.brokers.values()), "no partition under-replicated again")
    finally:
        cluster.close()
