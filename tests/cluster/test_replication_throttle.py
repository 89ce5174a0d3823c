"""Replication throttles (KIP-73) as Kafka's ``ReplicationQuotaManager`` keeps them: the quota's
rate and the throttled replicas lists (pure), then three in-process brokers over the session's
real ZooKeeper moving a partition under ``leader.replication.throttled.rate`` /
``follower.replication.throttled.rate`` set with confluent-kafka's admin client, then Kafka
4.4's ``kafka-reassign-partitions --throttle`` (which sets them) and ``--verify`` (which clears
them)."""

from __future__ import annotations

import datetime
import json
import os
import time

import pytest

from seglog.cluster.replication_quota import (ALL_REPLICAS, UNBOUNDED_BYTES_PER_S,
                                              ReplicationQuota, throttled_partitions)
from seglog.types import TopicPartition

from test_acl_cluster import Wire
from test_broker_cluster import make_cluster, produce_confluent, wait_until  # noqa: F401

TIMEOUT = datetime.timedelta(seconds=15)


# --- the quota and the lists (pure) ------------------------------------------------------------


def test_throttled_replicas_lists_name_this_brokers_partitions():
    assert throttled_partitions(("0:1", "1:2", "2:1"), 1) == frozenset({0, 2})
    assert throttled_partitions(("0:1", " 1:2 "), 2) == frozenset({1})
    assert throttled_partitions(("*",), 7) == ALL_REPLICAS
    assert throttled_partitions((), 1) == frozenset()


def test_the_quota_is_kafkas_rate_over_eleven_one_second_windows():
    now = [0]
    quota = ReplicationQuota("follower", clock_ms=lambda: now[0])
    assert not quota.bounded and quota.bound_bytes_per_s == UNBOUNDED_BYTES_PER_S
    quota.record(10**9)
    assert not quota.exceeded()  # no bound: never exceeded
    quota = ReplicationQuota("follower", clock_ms=lambda: now[0])
    quota.update_bound(1000)
    # A new rate counts at least ten whole windows: 10 000 bytes at once are within 1000 B/s.
    quota.record(10_000)
    assert quota.rate_bytes_per_s() == 1000.0 and not quota.exceeded()
    quota.record(1)
    assert quota.exceeded()
    now[0] = 5_000  # still ten windows
    assert quota.exceeded()
    now[0] = 10_500  # 10.5 s since the first sample started
    assert quota.rate_bytes_per_s() == pytest.approx(10_001 / 10.5)
    assert not quota.exceeded()
    now[0] = 23_000  # every sample expired
    assert quota.rate_bytes_per_s() == 0.0
    assert quota.recorded_bytes == 10_001


# --- three brokers ----------------------------------------------------------------------------

#: The rate the tests throttle to (bytes/s) and the bytes moved: about 10 s of throttled
#: replication after the burst a new rate allows (ten windows' worth).
RATE_BYTES_PER_S = 100_000
RECORD_BYTES = 4000
RECORDS = 500
#: Small fetches, so one answer does not carry most of the log before the quota is looked at.
FETCH_MAX_BYTES = 32_768
THROTTLED_CLUSTER = {"replica.fetch.max.bytes": FETCH_MAX_BYTES}


def _controller(cluster) -> int:
    return wait_until(lambda: (cluster.rm(0).controller_id,)
                      if cluster.rm(0).controller_id is not None else None,
                      "a controller")[0]


def _admin(cluster):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def _alter(admin, resource_type, name, ops):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource(resource_type, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=(
            AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET))
        for key, value in ops.items()])
    admin.incremental_alter_configs([resource])[resource].result(timeout=20)


def _broker_entries(admin, broker_id):
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource("BROKER", str(broker_id))
    entries = admin.describe_configs([resource])[resource].result(timeout=20)
    return {name: (e.value, int(e.source), e.is_read_only,
                   [(s.name, s.value, int(s.source)) for s in e.synonyms.values()])
            for name, e in entries.items() if "replication.throttled" in name
            or name == "replica.alter.log.dirs.io.max.bytes.per.second"}


def _create_on(cluster, topic, replicas):
    wire = Wire(cluster.bootstrap.split(",")[0])
    try:
        ct = wire.m(19, 7)
        r = wire.call(19, 7, validate_only=False, timeout=TIMEOUT, topics=(ct.CreatableTopic(
            name=topic, num_partitions=-1, replication_factor=-1, configs=(),
            assignments=(ct.CreatableReplicaAssignment(partition_index=0,
                                                       broker_ids=tuple(replicas)),)),))
        assert int(r.topics[0].error_code) == 0
    finally:
        wire.close()


def _reassign(wire, topic, target):
    ap = wire.m(45, 0)
    r = wire.call(45, 0, timeout=TIMEOUT, topics=(ap.ReassignableTopic(
        name=topic, partitions=(ap.ReassignablePartition(partition_index=0,
                                                         replicas=tuple(target)),)),))
    return [int(p.error_code) for t in r.responses for p in t.partitions]


def test_rates_are_dynamic_broker_configs_listed_only_while_set(make_cluster, zk_client):
    """As Kafka 4.4 answers (its DynamicConfig.Broker configs are not in KafkaConfig's
    ConfigDef): unset, DescribeConfigs leaves them out; set per broker, DYNAMIC_BROKER_CONFIG
    with itself as the only synonym; a bad value is INVALID_REQUEST in Kafka's words; each
    broker's quota takes its own value, else the cluster default."""
    from confluent_kafka import KafkaException

    cluster = make_cluster()
    admin = _admin(cluster)
    assert _broker_entries(admin, 1) == {}
    _alter(admin, "BROKER", "1", {"leader.replication.throttled.rate": "1000"})
    assert _broker_entries(admin, 1) == {"leader.replication.throttled.rate": (
        "1000", 2, False, [("leader.replication.throttled.rate", "1000", 2)])}
    with pytest.raises(KafkaException) as bad:
        _alter(admin, "BROKER", "1", {"leader.replication.throttled.rate": "-5"})
    assert "Invalid value -5 for configuration leader.replication.throttled.rate: Value " \
        "must be at least 0" in str(bad.value)
    wait_until(lambda: cluster.rm(1).leader_quota.bound_bytes_per_s == 1000,
               "broker 1's leader quota to take 1000 B/s")
    assert cluster.rm(0).leader_quota.bound_bytes_per_s == UNBOUNDED_BYTES_PER_S
    # The cluster default reaches every broker without a value of its own.
    from seglog.cluster.config_changes import write_entity_config
    from seglog.cluster import zk_data

    write_entity_config(zk_client, zk_data.CONFIG_TYPE_BROKER,
                        zk_data.broker_config_entity(None),
                        {"follower.replication.throttled.rate": "2000",
                         "leader.replication.throttled.rate": "3000"})
    wait_until(lambda: all(cluster.rm(b).follower_quota.bound_bytes_per_s == 2000
                           for b in cluster.brokers), "every follower quota at 2000 B/s")
    wait_until(lambda: cluster.rm(0).leader_quota.bound_bytes_per_s == 3000,
               "broker 0's leader quota at the default")
    assert cluster.rm(1).leader_quota.bound_bytes_per_s == 1000  # its own value wins
    _alter(admin, "BROKER", "1", {"leader.replication.throttled.rate": None,
                                  "replica.alter.log.dirs.io.max.bytes.per.second": None})
    wait_until(lambda: cluster.rm(1).leader_quota.bound_bytes_per_s == 3000,
               "broker 1's leader quota back to the default")


@pytest.mark.slow
@pytest.mark.parametrize("side", ["follower", "leader"])
def test_a_throttled_move_replicates_within_the_rate(make_cluster, side):
    """A partition moved from broker 0 to broker 1 with one side's rate set (the follower's
    on broker 1, or the leader's on broker 0) and the topic's throttled replicas naming the
    move (as kafka-reassign-partitions writes them): the bytes broker 1 fetches stay within
    Kafka's rate (at most the ten windows' burst a new rate allows, then the rate), that side
    left the partition out while over it, and every record arrives."""
    cluster = make_cluster(**THROTTLED_CLUSTER)
    controller = _controller(cluster)
    admin = _admin(cluster)
    _create_on(cluster, "slow", (0,))
    tp = TopicPartition("slow", 0)
    wait_until(lambda: cluster.leader_of(tp) == 0, "broker 0 to lead slow-0")
    values = [b"%06d" % i + b"x" * (RECORD_BYTES - 6) for i in range(RECORDS)]
    assert produce_confluent(cluster.bootstrap, "slow", values, **{
        "linger.ms": 0, "batch.size": RECORD_BYTES * 4}) == [None] * len(values)
    size_bytes = cluster.rm(0).partitions[tp].log.size_bytes
    assert size_bytes > 15 * RATE_BYTES_PER_S
    broker_id = 1 if side == "follower" else 0
    _alter(admin, "BROKER", str(broker_id),
           {f"{side}.replication.throttled.rate": str(RATE_BYTES_PER_S)})
    _alter(admin, "TOPIC", "slow", {"leader.replication.throttled.replicas": "0:0",
                                    "follower.replication.throttled.replicas": "0:1"})
    quota = getattr(cluster.rm(broker_id), f"{side}_quota")
    wait_until(lambda: quota.bound_bytes_per_s == RATE_BYTES_PER_S,
               f"the {side} rate to reach broker {broker_id}")
    wait_until(lambda: cluster.brokers[0].store.topic("slow").log(0).config
               .leader_replication_throttled_replicas == ("0:0",), "the topic config")
    follower = cluster.rm(1).follower_quota
    before = follower.recorded_bytes
    wire = Wire(cluster.brokers[controller].bootstrap)
    try:
        started = time.monotonic()
        assert _reassign(wire, "slow", (1,)) == [0]
        samples = []
        deadline = started + 60
        while time.monotonic() < deadline:
            samples.append((time.monotonic() - started, follower.recorded_bytes - before))
            assignment = cluster.rm(controller).assignments.get("slow")
            if assignment.partitions[0] == [1] and not assignment.removing_replicas:
                break
            time.sleep(0.25)
        else:
            pytest.fail(f"the throttled move did not complete: {samples[-3:]}")
        elapsed_s = time.monotonic() - started
    finally:
        wire.close()
    fetched = follower.recorded_bytes - before
    assert fetched >= size_bytes * 0.9, (fetched, size_bytes)
    # Kafka's Rate: a new rate counts ten windows, so up to ten seconds' worth may come at
    # once; after that the rate holds. Slack: two fetches in flight.
    slack = 2 * FETCH_MAX_BYTES
    for at_s, got in samples:
        assert got <= RATE_BYTES_PER_S * (at_s + 11) + slack, (at_s, got, samples)
    # A lower bound only (a sanity check, generous): what exceeds the burst took its time.
    assert elapsed_s >= (size_bytes - 11 * RATE_BYTES_PER_S - slack) / RATE_BYTES_PER_S * 0.5
    assert quota.throttled_count > 0
    assert cluster.rm(0).leader_quota.recorded_bytes >= size_bytes * 0.9
    wait_until(lambda: cluster.leader_of(tp) == 1, "broker 1 to lead slow-0")
    log1 = cluster.brokers[1].store.topic("slow").log(0)
    assert log1.end_offset == RECORDS


def test_in_sync_replicas_are_never_throttled(make_cluster):
    """Kafka throttles only replicas out of the ISR (``!isReplicaInSync`` on both sides): with
    every replica of a topic throttled (``*``) at 1000 B/s on both sides, in-sync followers
    keep up with acks=all produces far above that rate; the counters still count the bytes."""
    from test_broker_cluster import create_topic

    cluster = make_cluster(**THROTTLED_CLUSTER)
    admin = _admin(cluster)
    create_topic(cluster, "insync", config={"leader.replication.throttled.replicas": "*",
                                            "follower.replication.throttled.replicas": "*"})
    tp = TopicPartition("insync", 0)
    cluster.wait_for_isr(tp, 3)
    for broker_id in cluster.brokers:
        _alter(admin, "BROKER", str(broker_id), {"leader.replication.throttled.rate": "1000",
                                                 "follower.replication.throttled.rate": "1000"})
    wait_until(lambda: all(cluster.rm(b).leader_quota.bound_bytes_per_s == 1000
                           and cluster.rm(b).follower_quota.bound_bytes_per_s == 1000
                           for b in cluster.brokers), "the rates on every broker")
    values = [b"i%d" % i + b"w" * 1000 for i in range(300)]  # 300 KB: 300 s at the rate
    assert produce_confluent(cluster.bootstrap, "insync", values) == [None] * len(values)
    leader = cluster.leader_of(tp)
    assert cluster.rm(leader).leader_quota.recorded_bytes > 2 * 300_000 * 0.9
    assert cluster.rm(leader).leader_quota.throttled_count == 0
    assert all(cluster.rm(b).follower_quota.throttled_count == 0 for b in cluster.brokers)
    assert set(cluster.rm(leader).states[tp].isr) == {0, 1, 2}


# --- Kafka 4.4's tool -------------------------------------------------------------------------


@pytest.mark.kafka
@pytest.mark.slow
def test_kafka_reassign_partitions_throttle_sets_and_verify_clears(make_cluster, tmp_path):
    from seglog.bench.kafka import find_kafka

    ref, why = find_kafka()
    if ref is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {why}", pytrace=False)
        pytest.skip(why)
    cluster = make_cluster(**THROTTLED_CLUSTER)
    controller = _controller(cluster)
    bootstrap = cluster.brokers[controller].bootstrap
    run_dir = tmp_path / "tools"
    run_dir.mkdir()

    def tool(*args):
        done = ref.run_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                            ["--bootstrap-server", bootstrap, *args], run_dir=run_dir,
                            timeout_s=60)
        return done.returncode, done.stdout, done.stderr

    _create_on(cluster, "thr", (0,))
    tp = TopicPartition("thr", 0)
    wait_until(lambda: cluster.leader_of(tp) == 0, "broker 0 to lead thr-0")
    values = [b"%06d" % i + b"y" * 994 for i in range(300)]
    assert produce_confluent(cluster.bootstrap, "thr", values) == [None] * len(values)
    plan_file = run_dir / "plan.json"
    plan_file.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "thr", "partition": 0, "replicas": [1, 2]}]}))
    rc, out, err = tool("--execute", "--reassignment-json-file", str(plan_file),
                        "--throttle", "500000")
    assert rc == 0, (out, err[-2000:])
    assert "The inter-broker throttle limit was set to 500000 B/s" in out
    assert "Successfully started partition reassignment for thr-0" in out
    admin = _admin(cluster)
    # The tool set both rates on every broker of the move and the topic's lists.
    for broker_id in (0, 1, 2):
        entries = _broker_entries(admin, broker_id)
        assert entries["leader.replication.throttled.rate"][:2] == ("500000", 2), entries
        assert entries["follower.replication.throttled.rate"][:2] == ("500000", 2), entries
    config = cluster.brokers[0].store.topic("thr").log(0).config
    wait_until(lambda: cluster.brokers[0].store.topic("thr").log(0).config
               .follower_replication_throttled_replicas == ("0:1", "0:2"),
               "the follower list of the move")
    assert config is not None
    deadline = time.monotonic() + 60
    while True:
        rc, out, err = tool("--verify", "--reassignment-json-file", str(plan_file))
        assert rc == 0, (out, err[-2000:])
        if "is completed." in out or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "Reassignment of partition thr-0 is completed." in out, out
    assert "Clearing broker-level throttles on brokers 0,1,2" in out, out
    assert "Clearing topic-level throttles on topic thr" in out, out
    for broker_id in (0, 1, 2):
        assert _broker_entries(admin, broker_id) == {}
    wait_until(lambda: all(cluster.rm(b).follower_quota.bound_bytes_per_s
                           == UNBOUNDED_BYTES_PER_S
                           and cluster.rm(b).leader_quota.bound_bytes_per_s
                           == UNBOUNDED_BYTES_PER_S for b in cluster.brokers),
               "every quota unbounded again")
    wait_until(lambda: cluster.brokers[1].store.topic("thr").log(0).config
               .follower_replication_throttled_replicas == (), "the topic lists cleared")


# --- a replica a reassignment removed -------------------------------------------------------


def _log_dirs(wire):
    r = wire.call(35, 4, topics=None)
    return {(t.name, p.partition_index): int(p.partition_size)
            for result in r.results if int(result.error_code) == 0
            for t in result.topics for p in t.partitions}


def test_a_replica_removed_by_a_reassignment_deletes_its_log(make_cluster):
    """Kafka's StopReplica(delete): once the move of gone-0 from broker 0 to broker 1
    completes, broker 0's records of it go (segments renamed ``.deleted``, then removed after
    ``file.delete.delay.ms``) and its DescribeLogDirs no longer lists the partition; broker 1
    lists it with the records, which consumers read."""
    from test_broker_cluster import consume_all

    cluster = make_cluster()
    controller = _controller(cluster)
    _create_on(cluster, "gone", (0,))
    tp = TopicPartition("gone", 0)
    wait_until(lambda: cluster.leader_of(tp) == 0, "broker 0 to lead gone-0")
    values = [b"g%d" % i + b"z" * 500 for i in range(200)]
    assert produce_confluent(cluster.bootstrap, "gone", values) == [None] * len(values)
    admin = _admin(cluster)
    _alter(admin, "TOPIC", "gone", {"file.delete.delay.ms": "0"})
    log0 = cluster.brokers[0].store.topic("gone").log(0)
    wait_until(lambda: log0.config.file_delete_delay_ms == 0, "the topic config on broker 0")
    wire0 = Wire(cluster.brokers[0].bootstrap)
    wire1 = Wire(cluster.brokers[1].bootstrap)
    control = Wire(cluster.brokers[controller].bootstrap)
    try:
        assert _log_dirs(wire0)[("gone", 0)] > 0
        # Broker 1 holds no replica yet: its (empty) directory of gone-0 is not listed.
        assert ("gone", 0) not in _log_dirs(wire1)
        assert _reassign(control, "gone", (1,)) == [0]
        wait_until(lambda: cluster.rm(controller).assignments["gone"].partitions[0] == [1]
                   and not cluster.rm(controller).assignments["gone"].removing_replicas,
                   "the move of gone-0 to broker 1 to complete")
        wait_until(lambda: cluster.rm(0).removed_replicas_deleted >= 1,
                   "broker 0 to delete its removed replica")
        assert (log0.start_offset, log0.end_offset) == (0, 0)
        wait_until(lambda: ("gone", 0) not in _log_dirs(wire0),
                   "broker 0 to stop listing gone-0")
        wait_until(lambda: _log_dirs(wire1).get(("gone", 0), 0) > 0,
                   "broker 1 to list gone-0 with its records")
        assert cluster.rm(0).partitions.get(tp) is None
        # The segments went through .deleted; the store's maintenance removes them (delay 0).
        part_dir = os.path.join(cluster.brokers[0].store.path, "gone-0")

        def data_files():
            cluster.brokers[0].store.maintain()
            return [(n, os.path.getsize(os.path.join(part_dir, n)))
                    for n in os.listdir(part_dir)
                    if n.endswith((".log", ".deleted")) and os.path.getsize(
                        os.path.join(part_dir, n)) > 0]
        wait_until(lambda: data_files() == [], "broker 0's record files to be removed")
    finally:
        for w in (wire0, wire1, control):
            w.close()
    wait_until(lambda: cluster.leader_of(tp) == 1, "broker 1 to lead gone-0")
    assert consume_all(cluster.bootstrap, "gone", len(values)) == values
