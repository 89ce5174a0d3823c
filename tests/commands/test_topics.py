"""``seglog topics`` run as a real subprocess against a seglog data directory, a seglog broker
and a real Kafka 4.4 broker: the same steps give the same exit codes, error names and
(normalised) ``describe --output json`` on all three (each compared with one expected result,
Kafka 4.4's)."""

from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest

from kafka_waits import eventually

#: Exit codes of seglog.commands.target.
OK, ERROR, PROBLEMS = 0, 1, 3


def _unique(prefix: str) -> str:
    return f"test_topics_{prefix}_{uuid.uuid4().hex[:8]}"


def _normalised(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """What must agree between the three targets: the topic's own configs (Kafka shows broker
    defaults too, with other sources), partitions and replica counts; broker ids, topic ids
    and sizes legitimately differ (sizes: only that each is known, and 0 for an empty one)."""
    assert doc["name"] == name
    # Kafka's text of a uuid: URL-safe base64, unpadded
    assert len(doc["topic_id"]) == 22 and not set(doc["topic_id"]) & set("+/="), doc
    out: dict[str, Any] = {
        "internal": doc["internal"], "partition_count": doc["partition_count"],
        "replication_factor": doc["replication_factor"],
        "configs": {k: v["value"] for k, v in doc["configs"].items()
                    if v["source"] == "DYNAMIC_TOPIC_CONFIG"},
        "partitions": []}
    for p in doc["partitions"]:
        assert p["leader"] >= 0 and p["replicas"] == [p["leader"]] and p["isr"] == [p["leader"]]
        assert p["size_bytes"] == 0  # nothing written yet
        out["partitions"].append(p["partition"])
    return out


def _scenario(run: Callable[..., Any], where: list[str], name: str) -> dict[str, Any]:
    """The same steps on one target; returns what the targets must agree on."""
    seen: dict[str, Any] = {}

    def step(label: str, *args: str) -> Any:
        ran = run("topics", *args, *where)
        seen[label] = ran.returncode
        return ran

    def described(label: str, partitions: int, config: str) -> dict[str, Any]:
        """``describe -o json`` again, bounded, until the topic shows ``partitions`` and its
        ``config``: a Kafka broker's metadata image shows a create, an alter or new
        partitions a moment after the controller's answer (on every target alike)."""
        def shown(ran: Any) -> bool:
            try:
                topic = _normalised(ran.json()["topics"][0], name)
            except (AssertionError, LookupError, ValueError):
                return False
            return topic["partition_count"] == partitions and config in topic["configs"]

        ran = eventually(lambda: step(label, "describe", name, "-o", "json"), shown)
        return _normalised(ran.json()["topics"][0], name)

    ran = step("create", "create", name, "--partitions", "2", "--config", "retention.ms=1000",
               "--config", "cleanup.policy=compact")
    assert ran.returncode == OK, ran.stderr
    ran = step("create_again", "create", name, "-p", "2")
    assert "TOPIC_ALREADY_EXISTS" in ran.stderr and "Traceback" not in ran.stderr
    step("create_if_not_exists", "create", name, "-p", "2", "--if-not-exists")
    ran = step("create_bad_config", "create", name + "_bad", "-c", "retention.ms=abc")
    seen["bad_config_message"] = ran.stderr.strip().splitlines()[-1]
    ran = step("create_bad_name", "create", "bad/" + name)
    seen["bad_name_message"] = ran.stderr.strip().splitlines()[-1].replace(name, "NAME")
    seen["created"] = described("describe_created", 2, "cleanup.policy")

    ran = step("alter", "alter", name, "--config", "segment.bytes=1048576",
               "--delete-config", "retention.ms")
    assert ran.returncode == OK, ran.stderr
    ran = step("alter_unknown_config", "alter", name, "--config", "no.such.config=1")
    seen["unknown_config_message"] = ran.stderr.strip().splitlines()[-1]
    # deleting a config that is not set (or does not exist) changes nothing, as in Kafka
    step("alter_delete_unset", "alter", name, "--delete-config", "no.such.config")
    ran = step("add_partitions", "add-partitions", name, "--partitions", "3")
    assert ran.returncode == OK, ran.stderr
    ran = step("add_partitions_fewer", "add-partitions", name, "--partitions", "2")
    seen["fewer_error"] = ran.stderr.split(":")[1].strip()
    # (The new partitions were made after the alter: once they show, so does the alter.)
    seen["altered"] = described("describe_altered", 3, "segment.bytes")
    text = step("describe_text", "describe", name).stdout.splitlines()
    seen["text_shape"] = [line.startswith("\tTopic: ") for line in text]
    assert f"Topic: {name}\t" in text[0] and "segment.bytes=1048576" in text[0]
    assert name in step("list", "list").stdout.splitlines()
    assert name in step("list_json", "list", "-o", "json").json()["topics"]

    ran = step("describe_unknown", "describe", name, name + "_nope", "-o", "json")
    assert [t["name"] for t in ran.json()["topics"]] == [name]
    assert "UNKNOWN_TOPIC_OR_PARTITION" in ran.stderr
    step("alter_unknown", "alter", name + "_nope", "-c", "retention.ms=5")
    step("add_partitions_unknown", "add-partitions", name + "_nope", "-p", "4")
    ran = step("delete", "delete", name)
    assert ran.returncode == OK, ran.stderr
    step("delete_unknown", "delete", name)
    step("delete_if_exists", "delete", name, "--if-exists")
    return seen


#: What the steps give, normalised: Kafka 4.4's answers, which a data dir and a seglog broker
#: must give too (each target's whole result is compared with this one dict).
EXPECTED = {
    "create": OK, "create_again": ERROR, "create_if_not_exists": OK,
    "create_bad_config": ERROR, "create_bad_name": ERROR, "describe_created": OK,
    "alter_unknown_config": ERROR, "alter_delete_unset": OK, "alter": OK, "add_partitions": OK,
    "add_partitions_fewer": ERROR, "describe_altered": OK, "describe_text": OK, "list": OK,
    "list_json": OK, "describe_unknown": PROBLEMS, "alter_unknown": PROBLEMS,
    "add_partitions_unknown": PROBLEMS, "delete": OK, "delete_unknown": PROBLEMS,
    "delete_if_exists": OK,
    "created": {"internal": False, "partition_count": 2, "replication_factor": 1,
                "configs": {"cleanup.policy": "compact", "retention.ms": "1000"},
                "partitions": [0, 1]},
    "altered": {"internal": False, "partition_count": 3, "replication_factor": 1,
                "configs": {"cleanup.policy": "compact", "segment.bytes": "1048576"},
                "partitions": [0, 1, 2]},
    # Kafka's own message for a bad value, with Kafka's error name
    "bad_config_message": "seglog topics: INVALID_CONFIG: Invalid value abc for "
                          "configuration retention.ms: Not a number of type LONG",
    "bad_name_message": "seglog topics: INVALID_TOPIC_EXCEPTION: Topic name is invalid: "
                        "'bad/NAME' contains one or more characters other than ASCII "
                        "alphanumerics, '.', '_' and '-'",
    "unknown_config_message": "seglog topics: INVALID_CONFIG: Unknown topic config name: "
                              "no.such.config",
    "fewer_error": "INVALID_PARTITIONS",
    # a header line per topic, then a line per partition (kafka-topics --describe)
    "text_shape": [False, True, True, True],
}


def test_topics_on_a_data_dir(run_seglog, tmp_path):
    seen = _scenario(run_seglog, ["--data-dir", str(tmp_path / "data")], _unique("local"))
    assert seen == EXPECTED


def test_topics_on_a_seglog_broker(run_seglog, seglog_broker):
    seen = _scenario(run_seglog, ["-b", seglog_broker.bootstrap], _unique("seglog"))
    assert seen == EXPECTED


@pytest.mark.kafka
def test_topics_on_kafka(run_seglog, kafka_bootstrap):
    """The same steps against Kafka 4.4 give the same result as on a data dir and on a
    seglog broker (the tests above): exit codes, error names, Kafka's message for a bad
    value, normalised describes."""
    seen = _scenario(run_seglog, ["-b", kafka_bootstrap], _unique("kafka"))
    assert seen == EXPECTED


def test_local_mode_on_a_served_data_dir_says_so(run_seglog, seglog_broker):
    ran = run_seglog("topics", "list", "--data-dir", seglog_broker.data_dir)
    assert ran.returncode == ERROR
    assert "is a broker serving it? use --bootstrap-server" in ran.stderr
    assert "Traceback" not in ran.stderr


def _own_configs(doc: dict[str, Any]) -> dict[str, Any]:
    """``describe -o json`` without the broker-level configs (a broker reports its defaults;
    a data dir has none)."""
    for topic in doc["topics"]:
        topic["configs"] = {k: v for k, v in topic["configs"].items()
                            if v["source"] == "DYNAMIC_TOPIC_CONFIG"}
    return doc


def test_local_describe_sizes_and_the_one_broker(run_seglog, tmp_path, seglog_broker_factory):
    """Sizes on disk are each partition's bytes; the data dir's node id leads. The same dir
    served by a broker describes the same over the wire: topic ids, partitions, leaders,
    sizes (DescribeLogDirs), the topics' own configs, internal topics included."""
    from seglog import Store
    data = tmp_path / "data"
    name = _unique("sizes")
    with Store(data, offsets_topic_partitions=1) as store:
        store.create_topic(name, 2, {"retention.ms": "3600000"})
        producer = store.producer()
        for i in range(10):
            producer.send(name, b"v" * 100, partition=0)
        producer.flush()
        producer.close()
        consumer = store.consumer("g", [name])  # a commit makes __consumer_offsets
        consumer.poll(1000)
        consumer.commit()
        consumer.close()
        node_id = store.meta.node_id
    ran = run_seglog("topics", "describe", "--include-internal", "--data-dir", str(data),
                     "-o", "json")
    assert ran.returncode == OK, ran.stderr
    local = ran.json()
    assert [(t["name"], t["internal"]) for t in local["topics"]] == [
        ("__consumer_offsets", True), (name, False)]
    parts = local["topics"][1]["partitions"]
    assert parts[0]["size_bytes"] > 1000 and parts[1]["size_bytes"] == 0
    assert {p["leader"] for p in parts} == {node_id}
    assert local["topics"][1]["configs"] == {
        "retention.ms": {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}}
    ran = run_seglog("topics", "describe", name, "--data-dir", str(data))
    assert f"node {node_id} leads" in ran.stderr
    assert run_seglog("topics", "list", "--data-dir", str(data)).stdout.split() == [name]

    broker = seglog_broker_factory(data_dir=data)
    ran = run_seglog("topics", "describe", "--include-internal", "-b", broker.bootstrap,
                     "-o", "json")
    assert ran.returncode == OK, ran.stderr
    assert _own_configs(ran.json()) == local
    assert run_seglog("topics", "list", "-b", broker.bootstrap).stdout.split() == [name]


def test_offline_partition_in_a_data_dir(run_seglog, tmp_path, seglog_broker_factory):
    """A partition whose flushed data is gone is offline: no leader, no size (its last ISR
    kept, as Kafka's controller keeps it); the store's reason is one warning line; the
    kafka-topics filter picks it out; a broker serving the dir describes the same."""
    import glob
    import os
    import sys
    from pathlib import Path

    from seglog import Store
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from segment_helpers import batch_starts

    data = tmp_path / "data"
    name = _unique("offline")
    with Store(data, offsets_topic_partitions=1) as store:
        store.create_topic(name, 2, {"segment.bytes": "300"})
        for p in (0, 1):
            for i in range(6):
                store.topic(name).log(p).append_batch([b"a%d" % i, b"b%d" % i])
    last = sorted(glob.glob(os.path.join(data, f"{name}-0", "*.log")))[-1]
    os.truncate(last, batch_starts(last)[1])  # flushed offsets gone: offline at the check

    where = ["--data-dir", str(data)]
    ran = run_seglog("topics", "describe", name, *where, "-o", "json")
    assert ran.returncode == OK, ran.stderr
    p0, p1 = ran.json()["topics"][0]["partitions"]
    assert (p0["leader"], p0["isr"], p0["size_bytes"]) == (-1, p0["replicas"], None)
    assert p1["leader"] >= 0 and p1["size_bytes"] > 0
    warned = [line for line in ran.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1 and f"{name}-0 is offline" in warned[0]
    assert "seglog recover" in warned[0]
    ran = run_seglog("topics", "describe", *where, "--unavailable-partitions")
    assert ran.stdout.splitlines() == [
        f"\tTopic: {name}\tPartition: 0\tLeader: none\tReplicas: {p0['replicas'][0]}\t"
        f"Isr: {p0['replicas'][0]}\tSize: ?"]
    ran = run_seglog("topics", "describe", *where, "--unavailable-partitions", "-o", "json")
    assert [[p["partition"] for p in t["partitions"]] for t in ran.json()["topics"]] == [[0]]
    local = ran.json()

    with pytest.warns(RuntimeWarning, match="offline"):
        broker = seglog_broker_factory(data_dir=data)
    ran = run_seglog("topics", "describe", "-b", broker.bootstrap, "--unavailable-partitions",
                     "-o", "json")
    assert ran.returncode == OK, ran.stderr
    assert _own_configs(ran.json()) == local


def test_usage_errors(run_seglog, tmp_path):
    where = ["--data-dir", str(tmp_path / "data")]
    assert run_seglog("topics", "create", "x", "-p", "0", *where).returncode == 2
    ran = run_seglog("topics", "create", "x", "--config", "noequals", *where)
    assert ran.returncode == 2 and "NAME=VALUE" in ran.stderr
    ran = run_seglog("topics", "alter", "x", *where)
    assert ran.returncode == 2
    ran = run_seglog("topics", "list", "--data-dir", str(tmp_path / "missing"))
    assert ran.returncode == ERROR and "no such data directory" in ran.stderr
    (tmp_path / "plain").mkdir()
    ran = run_seglog("topics", "describe", "--data-dir", str(tmp_path / "plain"))
    assert ran.returncode == ERROR and "not a data directory" in ran.stderr
    assert list((tmp_path / "plain").iterdir()) == []  # nothing written there
    ran = run_seglog("topics", "create", "x", "-r", "2", *where)
    assert ran.returncode == ERROR and "INVALID_REPLICATION_FACTOR" in ran.stderr


def _produce_to_partition_0(bootstrap: str, name: str, count: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(name, b"v" * 100, key=str(i).encode(), partition=0)
    assert producer.flush(30) == 0


def _sizes_over_the_wire(run_seglog: Callable[..., Any], bootstrap: str, name: str) -> None:
    assert run_seglog("topics", "create", name, "-p", "2", "-b", bootstrap).returncode == OK
    _produce_to_partition_0(bootstrap, name, 10)
    ran = run_seglog("topics", "describe", name, "-b", bootstrap, "-o", "json")
    assert ran.returncode == OK, ran.stderr
    parts = ran.json()["topics"][0]["partitions"]
    # DescribeLogDirs' partition_size: ten 100-byte records and their batch framing
    assert parts[0]["size_bytes"] > 1000 and parts[1]["size_bytes"] == 0, parts
    ran = run_seglog("topics", "describe", name, "-b", bootstrap)
    assert "\tPartition: 0\t" in ran.stdout and f"Size: {parts[0]['size_bytes']}" in ran.stdout
    assert run_seglog("topics", "delete", name, "-b", bootstrap).returncode == OK


def test_sizes_on_disk_of_a_seglog_broker(run_seglog, seglog_broker):
    _sizes_over_the_wire(run_seglog, seglog_broker.bootstrap, _unique("sizes_seglog"))


@pytest.mark.kafka
def test_sizes_on_disk_of_kafka(run_seglog, kafka_bootstrap):
    _sizes_over_the_wire(run_seglog, kafka_bootstrap, _unique("sizes_kafka"))


def test_sasl_through_command_config(run_seglog, seglog_broker_factory, tmp_path):
    """Kafka client properties in --command-config (SASL/PLAIN with a JAAS line) reach both
    the AdminClient and the DescribeLogDirs request; a user denied DescribeLogDirs (DESCRIBE
    on the cluster) still gets the description, without sizes, told why; a wrong password
    is exit 1."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       AdminClient, ResourcePatternType, ResourceType)
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_admin="admin-secret" '
            'user_alice="alice-secret";')
    broker = seglog_broker_factory(config={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"})
    login = ('sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule '
             'required username="{}" password="{}";\n')

    def properties(user: str, password: str, extra: str = "") -> str:
        path = tmp_path / f"{user}-{password}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" + extra
                        + login.format(user, password))
        return str(path)

    admin_where = ["-b", broker.bootstrap, "--command-config",
                   properties("admin", "admin-secret")]
    name = _unique("sasl")
    ran = run_seglog("topics", "create", name, "-p", "2", *admin_where)
    assert ran.returncode == OK, ran.stderr
    ran = run_seglog("topics", "describe", name, *admin_where, "-o", "json")
    assert ran.returncode == OK, ran.stderr
    assert [p["size_bytes"] for p in ran.json()["topics"][0]["partitions"]] == [0, 0]
    assert "sizes on disk unknown" not in ran.stderr

    admin = AdminClient({"bootstrap.servers": broker.bootstrap,
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": "admin", "sasl.password": "admin-secret"})
    deny = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                      "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.DENY)
    for future in admin.create_acls([deny], request_timeout=30).values():
        future.result(timeout=30)
    alice_where = ["-b", broker.bootstrap, "--command-config",
                   properties("alice", "alice-secret")]
    ran = run_seglog("topics", "describe", name, *alice_where, "-o", "json")
    assert ran.returncode == OK, ran.stderr
    assert [p["size_bytes"] for p in ran.json()["topics"][0]["partitions"]] == [None, None]
    assert "sizes on disk unknown" in ran.stderr
    assert "CLUSTER_AUTHORIZATION_FAILED" in ran.stderr, ran.stderr

    bad = properties("alice", "wrong", "request.timeout.ms=2000\n")
    ran = run_seglog("topics", "list", "-b", broker.bootstrap, "--command-config", bad)
    assert ran.returncode == ERROR and "Traceback" not in ran.stderr
    assert "Invalid username or password" in ran.stderr, ran.stderr


def test_no_broker_listening(run_seglog, tmp_path):
    """A refused connection ends within the client's request.timeout.ms (from
    --command-config) with exit 1 and librdkafka's reason once, not its retry log."""
    import socket
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    props = tmp_path / "client.properties"
    props.write_text("request.timeout.ms=1500\n")
    ran = run_seglog("topics", "describe", "x", "-b", f"127.0.0.1:{port}",
                     "--command-config", str(props))
    assert ran.returncode == ERROR
    assert "Connection refused" in ran.stderr and len(ran.stderr.splitlines()) == 1, ran.stderr


def test_help_has_an_example(capsys):
    from seglog.cli import build_parser
    for action in ("list", "describe", "create", "alter", "add-partitions", "delete"):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args(["topics", action, "--help"])
        assert exited.value.code == 0
        out = capsys.readouterr().out
        assert "example:\n  seglog topics " + action in out, out
