"""``seglog groups`` run as a subprocess against a seglog data directory, a seglog broker and a
real Kafka 4.4 broker: the same scenario on each (a group made by a real consumer that
commits, describe with members and lag, reset offsets dry run and executed and checked with a
consumer, delete offsets, delete), outputs compared after normalising what legitimately
differs (member ids, hosts, client ids, coordinator ids and addresses).
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import seglog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from security_certs import have_openssl, make_ca  # noqa: E402

WAIT_S = 30.0
PARTITIONS = 3
PER_PARTITION = 10
#: Record n of a partition has timestamp BASE_MS + n s: --to-datetime BASE + 5 s is offset 5.
BASE_MS = 1_700_000_000_000
BASE_ISO = "2023-11-14T22:13:20Z"
FIVE_ISO = "2023-11-14T22:13:25Z"
#: The topics' config: records dated 2023 are kept (no time-based retention).
NO_RETENTION = {"retention.ms": "-1"}
#: What the group commits while its member is live: lag 5, 2, 0.
COMMITTED = {0: 5, 1: 8, 2: 10}

_counter = iter(range(1_000_000))


def _names() -> tuple[str, str]:
    n = f"{os.getpid()}-{next(_counter)}"
    return f"test-groups-{n}", f"test-groups-g-{n}"


def _deadline_loop(what: Any, done: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    end = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")
        time.sleep(0.05)


def _broker_setup(bootstrap: str, topic: str, group: str, protocol: str = "classic"
                  ) -> Consumer:
    """The topic with its records, and a live member of ``group`` (of the ``protocol``
    given) that committed :data:`COMMITTED` (returned open)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # retention.ms -1: the records are dated 2023, and a broker's retention check (Kafka's
    # runs every 5 minutes on the session's shared broker) would delete them mid-test.
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=NO_RETENTION)]
                        )[topic].result(WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for p in range(PARTITIONS):
        for n in range(PER_PARTITION):
            producer.produce(topic, b"v%d" % n, partition=p, timestamp=BASE_MS + n * 1000)
    assert producer.flush(WAIT_S) == 0
    config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": "groups-test",
              "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "group.protocol": protocol}
    if protocol == "classic":  # the consumer protocol's session timeout is the broker's
        config["session.timeout.ms"] = 10_000
    consumer = Consumer(config)
    consumer.subscribe([topic])
    _deadline_loop("an assignment", lambda: consumer.poll(0.2) is not None
                   and len(consumer.assignment()) == PARTITIONS
                   or len(consumer.assignment()) == PARTITIONS)
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in COMMITTED.items()],
                    asynchronous=False)
    return consumer


def _positions_seen_by_a_consumer(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    """The first offset a consumer of ``group`` reads per partition (the committed one)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "latest"})
    try:
        # the committed offsets as the consumer reads them (OffsetFetch), then where it starts
        committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                       timeout=WAIT_S)
        assert {tp.partition: tp.offset for tp in committed} == {0: 3, 1: 6, 2: 8}
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        seen: dict[int, int] = {}

        def poll() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.setdefault(message.partition(), message.offset())
            return len(seen) == PARTITIONS
        _deadline_loop(lambda: f"a record of every partition from {bootstrap} (seen {seen})",
                       poll)
        return seen
    finally:
        consumer.close()


def _normalised(description: dict[str, Any]) -> dict[str, Any]:
    """A describe JSON group with what differs between brokers taken out."""
    return {
        "type": description["type"], "state": description["state"],
        "members": [{"partitions": m["partitions"]} for m in description["members"]],
        "offsets": [{k: r[k] for k in ("topic", "partition", "committed_offset",
                                       "log_end_offset", "lag")}
                    | {"owned": r["member_id"] is not None}
                    for r in description["offsets"]],
    }


def _rename(value: Any, topic: str, group: str) -> Any:
    """``value`` with the scenario's topic and group names replaced by placeholders."""
    if isinstance(value, dict):
        return {k: _rename(v, topic, group) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, topic, group) for v in value]
    if value == topic:
        return "TOPIC"
    if value == group:
        return "GROUP"
    return value


def _scenario(run_seglog, where: list[str], topic: str, group: str,
              consumer: Any | None, positions: Callable[[], dict[int, int]]) -> dict[str, Any]:
    """Run the tool's commands on a group that has :data:`COMMITTED`; returns the normalised
    outputs. ``consumer``: the live member (closed half-way), None in a data directory."""
    out: dict[str, Any] = {}

    def groups(*args: str, code: int = 0) -> Any:
        ran = run_seglog("groups", *args, *where)
        assert ran.returncode == code, (args, ran.returncode, ran.stdout, ran.stderr)
        return ran

    listed = groups("list", "-o", "json").json()["groups"]
    out["listed"] = [g for g in listed if g["group"] == group]
    if consumer is not None:
        live = groups("describe", group, "-o", "json").json()["groups"][0]
        out["live"] = _normalised(live)
        assert live["coordinator"] is not None and live["assignor"] == "range"
        assert {m["client_id"] for m in live["members"]} == {"groups-test"}
        text = groups("describe", group).stdout
        assert "CURRENT-OFFSET" in text and "groups-test" in text
        refused = groups("reset-offsets", group, "--all-topics", "--to-earliest", code=1)
        assert "inactive" in refused.stderr and "Stable" in refused.stderr
        consumer.close()
        _deadline_loop("the group to empty", lambda: groups(
            "describe", group, "-o", "json").json()["groups"][0]["state"] == "Empty")
    out["empty"] = _normalised(groups("describe", group, "-o", "json").json()["groups"][0])
    out["by_state"] = [[g["group"] for g in groups("list", *args, "-o", "json").json()["groups"]
                        if g["group"] == group]
                       for args in (["--state", "empty"], ["--state", "Stable"],
                                    ["--type", "share"], ["--type", "classic"])]
    out["dry_earliest"] = groups("reset-offsets", group, "--all-topics", "--to-earliest",
                                 "-o", "json").json()
    out["dry_datetime"] = groups("reset-offsets", group, "--topic", f"{topic}:0,2",
                                 "--to-datetime", FIVE_ISO, "-o", "json").json()
    out["dry_clamped"] = groups("reset-offsets", group, "--topic", topic, "--to-offset",
                                "100", "--dry-run", "-o", "json").json()
    assert "NEW-OFFSET" in groups("reset-offsets", group, "--topic", topic, "--to-latest").stdout
    out["unchanged"] = _normalised(groups("describe", group, "-o", "json").json()["groups"][0])
    out["shifted"] = groups("reset-offsets", group, "--all-topics", "--shift-by", "-2",
                            "--execute", "-o", "json").json()
    out["positions"] = positions()
    out["missing_topic"] = groups("reset-offsets", group, "--topic", "no-such-topic-groups",
                                  "--to-earliest", code=3).returncode
    out["deleted_offsets"] = groups("delete-offsets", group, "--topic", f"{topic}:0",
                                    "-o", "json").json()
    out["after_delete_offsets"] = _normalised(
        groups("describe", group, "-o", "json").json()["groups"][0])
    out["deleted"] = groups("delete", group, "-o", "json").json()
    groups("describe", group, code=3)
    assert group not in [g["group"] for g in groups("list", "-o", "json").json()["groups"]]
    return _rename(out, topic, group)


EXPECTED_EMPTY = {
    "type": "classic", "state": "Empty", "members": [],
    "offsets": [{"topic": "TOPIC", "partition": p, "committed_offset": o, "log_end_offset": 10,
                 "lag": 10 - o, "owned": False} for p, o in COMMITTED.items()]}


def _check_scenario(out: dict[str, Any]) -> None:
    """What every target must show (the data directory has no live member)."""
    assert out["listed"] == [{"group": "GROUP", "type": "classic", "state": "Empty"
                              if "live" not in out else "Stable", "protocol_type": "consumer"}]
    assert out["empty"] == out["unchanged"] == EXPECTED_EMPTY
    assert out["by_state"] == [["GROUP"], [], [], ["GROUP"]]
    assert [r["new_offset"] for r in out["dry_earliest"]["offsets"]] == [0, 0, 0]
    assert out["dry_earliest"]["executed"] is False
    assert [(r["partition"], r["new_offset"]) for r in out["dry_datetime"]["offsets"]] == \
        [(0, 5), (2, 5)]
    assert [r["new_offset"] for r in out["dry_clamped"]["offsets"]] == [10, 10, 10]
    assert [(r["previous_offset"], r["new_offset"]) for r in out["shifted"]["offsets"]] == \
        [(5, 3), (8, 6), (10, 8)]
    assert out["positions"] == {0: 3, 1: 6, 2: 8}
    assert out["missing_topic"] == 3
    assert out["deleted_offsets"]["partitions"] == [
        {"topic": "TOPIC", "partition": 0, "error": None}]
    assert [r["partition"] for r in out["after_delete_offsets"]["offsets"]] == [1, 2]
    assert out["deleted"] == {"groups": [{"group": "GROUP", "error": None}]}


def _data_dir_scenario(run_seglog, tmp_path) -> dict[str, Any]:
    topic, group = _names()
    path = tmp_path / "data"
    with seglog.Store(path) as store:
        store.create_topic(topic, PARTITIONS, NO_RETENTION)
        producer = store.producer()
        for p in range(PARTITIONS):
            for n in range(PER_PARTITION):
                producer.send(topic, b"v%d" % n, partition=p, timestamp_ms=BASE_MS + n * 1000)
        producer.flush()
        consumer = store.consumer(group, [topic], auto_offset_reset="earliest")
        consumer.commit({(topic, p): o for p, o in COMMITTED.items()})
        consumer.close()

    def positions() -> dict[int, int]:
        with seglog.Store(path) as store:
            consumer = store.consumer(group)
            consumer.assign([(topic, p) for p in range(PARTITIONS)])
            seen: dict[int, int] = {}
            for _ in range(50):
                for record in consumer.poll(timeout_ms=100):
                    seen.setdefault(record.partition, record.offset)
                if len(seen) == PARTITIONS:
                    break
            consumer.close()
            return seen
    return _scenario(run_seglog, ["--data-dir", str(path)], topic, group, None, positions)


def test_groups_on_a_data_dir(run_seglog, tmp_path):
    out = _data_dir_scenario(run_seglog, tmp_path)
    _check_scenario(out)


def _both(scenario: Callable[..., dict[str, Any]], run_seglog, seglog_bootstrap: str,
          kafka_bootstrap: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``scenario`` against the seglog broker and the Kafka broker at the same time (the
    commands are subprocesses: the two runs mostly wait)."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        on_seglog = pool.submit(scenario, run_seglog, seglog_bootstrap)
        on_kafka = pool.submit(scenario, run_seglog, kafka_bootstrap)
        return on_seglog.result(), on_kafka.result()


def _broker_scenario(run_seglog, bootstrap: str) -> dict[str, Any]:
    topic, group = _names()
    consumer = _broker_setup(bootstrap, topic, group)
    return _scenario(run_seglog, ["-b", bootstrap], topic, group, consumer,
                     lambda: _positions_seen_by_a_consumer(bootstrap, topic, group))


@pytest.mark.kafka
def test_groups_on_seglog_and_kafka_alike(run_seglog, seglog_bootstrap, kafka_shared_groups):
    seglog_out, kafka_out = _both(_broker_scenario, run_seglog, seglog_bootstrap,
                                  kafka_shared_groups.bootstrap)
    assert seglog_out["live"] == {
        "type": "classic", "state": "Stable",
        "members": [{"partitions": [{"topic": "TOPIC", "partition": p}
                                    for p in range(PARTITIONS)]}],
        "offsets": [{**row, "owned": True} for row in EXPECTED_EMPTY["offsets"]]}
    for out in (seglog_out, kafka_out):
        out["listed"] = [dict(g, state="Stable") for g in out["listed"]]
        _check_scenario(out)
    assert seglog_out == kafka_out
    # the data directory's run (test_groups_on_a_data_dir) passes the same _check_scenario


def test_usage_and_missing_things(run_seglog, tmp_path, seglog_broker_factory):
    served = tmp_path / "served"
    seglog_broker_factory(data_dir=served)
    ran = run_seglog("groups", "list", "--data-dir", str(served))
    assert ran.returncode == 1 and "is a broker serving it?" in ran.stderr
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ran = run_seglog("groups", "describe", "g", "-b", f"127.0.0.1:{port}")
    assert ran.returncode == 1 and "no bootstrap server answers" in ran.stderr
    assert "Traceback" not in ran.stderr
    ran = run_seglog("groups", "list", "--data-dir", str(tmp_path / "absent"))
    assert ran.returncode == 1 and "no such directory" in ran.stderr
    ran = run_seglog("groups", "reset-offsets", "g", "--all-topics", "--data-dir",
                     str(tmp_path))
    assert ran.returncode == 2  # no --to-... given: argparse's usage error
    ran = run_seglog("groups", "describe", "nobody", "--data-dir", str(tmp_path))
    assert ran.returncode == 3 and "does not exist" in ran.stderr
    for command in ("list", "describe", "reset-offsets", "delete-offsets", "delete"):
        ran = run_seglog("groups", command, "--help")
        assert ran.returncode == 0 and "example:\n  seglog groups" in ran.stdout


def _share_scenario(run_seglog, bootstrap: str) -> dict[str, Any]:
    """A share group made by confluent-kafka's ShareConsumer that reads every record; then
    describe, reset (refused while live, executed when empty, checked with a new share
    consumer), delete offsets and delete."""
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)

    topic, group = _names()
    group = group.replace("-g-", "-sg-")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(WAIT_S)
    for future in admin.incremental_alter_configs([ConfigResource(
            ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                "share.auto.offset.reset", "earliest",
                incremental_operation=AlterConfigOpType.SET)])]).values():
        future.result(WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for n in range(2 * PER_PARTITION):
        producer.produce(topic, b"v%d" % n, partition=n % 2)
    assert producer.flush(WAIT_S) == 0

    def share_consumer_reads(count: int) -> dict[int, int]:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "client.id": "share-test"})
        consumer.subscribe([topic])
        first: dict[int, int] = {}
        seen = 0

        def poll() -> bool:
            nonlocal seen
            for message in consumer.poll(0.2):
                if message.error() is None:
                    seen += 1
                    first[message.partition()] = min(message.offset(),
                                                     first.get(message.partition(), 1 << 62))
            return seen >= count
        try:
            _deadline_loop("share records", poll)
            consumer.commit_sync(WAIT_S)
        finally:
            consumer.close()
        return first

    def groups(*args: str, code: int = 0) -> Any:
        ran = run_seglog("groups", *args, "-b", bootstrap)
        assert ran.returncode == code, (args, ran.returncode, ran.stdout, ran.stderr)
        return ran

    out: dict[str, Any] = {}
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "client.id": "share-test"})
    consumer.subscribe([topic])
    got = 0

    def poll() -> bool:
        nonlocal got
        got += sum(1 for m in consumer.poll(0.2) if m.error() is None)
        return got >= 2 * PER_PARTITION
    _deadline_loop("share records", poll)
    consumer.commit_sync(WAIT_S)
    out["listed"] = [g for g in groups("list", "--type", "share", "-o", "json").json()["groups"]
                     if g["group"] == group]
    live = groups("describe", group, "-o", "json").json()["groups"][0]
    out["live"] = {"type": live["type"], "state": live["state"], "assignor": live["assignor"],
                   "members": [[m["client_id"], m["partitions"]] for m in live["members"]]}
    assert "START-OFFSET" in groups("describe", group).stdout
    refused = groups("reset-offsets", group, "--all-topics", "--to-earliest", code=1)
    out["refused"] = "inactive" in refused.stderr
    consumer.close()
    _deadline_loop("the share group to empty", lambda: groups(
        "describe", group, "-o", "json").json()["groups"][0]["state"] == "Empty")
    out["reset"] = groups("reset-offsets", group, "--topic", topic, "--to-offset", "5",
                          "--execute", "-o", "json").json()["offsets"]
    out["after_reset"] = [{k: r[k] for k in ("topic", "partition", "start_offset", "lag")}
                          for r in groups("describe", group, "-o", "json").json()["groups"][0]
                          ["offsets"]]
    out["first_read"] = share_consumer_reads(2 * (PER_PARTITION - 5))
    _deadline_loop("the share group to empty", lambda: groups(
        "describe", group, "-o", "json").json()["groups"][0]["state"] == "Empty")
    out["deleted_offsets"] = groups("delete-offsets", group, "--topic", topic,
                                    "-o", "json").json()["partitions"]
    out["after_delete_offsets"] = groups("describe", group, "-o", "json").json()["groups"][0][
        "offsets"]
    out["deleted"] = groups("delete", group, "-o", "json").json()
    groups("describe", group, code=3)
    return _rename(out, topic, group)


@pytest.mark.kafka
def test_share_groups_on_seglog_and_kafka_alike(run_seglog, seglog_bootstrap,
                                                kafka_shared_groups):
    seglog_out, kafka_out = _both(_share_scenario, run_seglog, seglog_bootstrap,
                                  kafka_shared_groups.bootstrap)
    assert seglog_out["listed"] == [{"group": "GROUP", "type": "share", "state": "Stable",
                                     "protocol_type": "share"}]
    assert seglog_out["live"]["members"] == [["share-test", [
        {"topic": "TOPIC", "partition": 0}, {"topic": "TOPIC", "partition": 1}]]]
    assert seglog_out["refused"] is True
    assert [r["new_offset"] for r in seglog_out["reset"]] == [5, 5]
    assert seglog_out["after_reset"] == [{"topic": "TOPIC", "partition": p, "start_offset": 5,
                                          "lag": 5} for p in (0, 1)]
    assert seglog_out["first_read"] == {0: 5, 1: 5}
    assert [r["error"] for r in seglog_out["deleted_offsets"]] == [None, None]
    assert seglog_out["after_delete_offsets"] == []
    assert seglog_out["deleted"] == {"groups": [{"group": "GROUP", "error": None}]}
    assert seglog_out == kafka_out


def _consumer_protocol_scenario(run_seglog, bootstrap: str) -> dict[str, Any]:
    """A KIP-848 consumer group: its live description and listing, then empty."""
    topic, group = _names()
    consumer = _broker_setup(bootstrap, topic, group, protocol="consumer")
    try:
        ran = run_seglog("groups", "describe", group, "-b", bootstrap, "-o", "json")
        assert ran.returncode == 0, ran.stderr
        live = ran.json()["groups"][0]
        listed = run_seglog("groups", "list", "--type", "consumer", "-b", bootstrap,
                            "-o", "json").json()["groups"]
    finally:
        consumer.close()
    return _rename({"live": _normalised(live), "assignor": live["assignor"],
                    "clients": [m["client_id"] for m in live["members"]],
                    "listed": [g for g in listed if g["group"] == group]}, topic, group)


@pytest.mark.kafka
def test_consumer_protocol_groups_alike(run_seglog, seglog_bootstrap, kafka_shared_groups):
    seglog_out, kafka_out = _both(_consumer_protocol_scenario, run_seglog, seglog_bootstrap,
                                  kafka_shared_groups.bootstrap)
    assert seglog_out == {
        "live": {"type": "consumer", "state": "Stable",
                 "members": [{"partitions": [{"topic": "TOPIC", "partition": p}
                                             for p in range(PARTITIONS)]}],
                 "offsets": [{**row, "owned": True} for row in EXPECTED_EMPTY["offsets"]]},
        "assignor": "uniform", "clients": ["groups-test"],
        "listed": [{"group": "GROUP", "type": "consumer", "state": "Stable",
                    "protocol_type": "consumer"}]}
    assert seglog_out == kafka_out


@pytest.mark.skipif(not have_openssl(), reason="needs the openssl command")
def test_groups_over_sasl_ssl_with_command_config(run_seglog, tmp_path):
    """--command-config with Kafka's client properties (SASL_SSL, PLAIN, a PEM truststore):
    the AdminClient and the protocol client both log in."""
    ca = make_ca(tmp_path / "ca")
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_admin="admin-secret" '
            'user_alice="alice-secret";')
    broker = seglog.Broker(tmp_path / "data", listen=("127.0.0.1", 0), config={
        "listeners": "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca.issue("b").pem_path),
        "sasl.enabled.mechanisms": "PLAIN", "group.initial.rebalance.delay.ms": 0,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas})
    broker.start()
    try:
        properties = tmp_path / "client.properties"
        properties.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="alice" password="alice-secret";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={ca.cert_path}\n")
        topic, group = _names()
        store_side = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_SSL",
                      "ssl.ca.location": str(ca.cert_path), "sasl.mechanism": "PLAIN",
                      "sasl.username": "alice", "sasl.password": "alice-secret"}
        admin = AdminClient(store_side)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)
        consumer = Consumer(store_side | {"group.id": group, "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        consumer.close()
        where = ["-b", broker.bootstrap, "--command-config", str(properties)]
        ran = run_seglog("groups", "describe", group, *where, "-o", "json")
        assert ran.returncode == 0, ran.stderr
        assert ran.json()["groups"][0]["offsets"][0]["committed_offset"] == 0
        ran = run_seglog("groups", "delete", group, *where)
        assert ran.returncode == 0, ran.stderr
        properties.write_text(properties.read_text().replace("alice-secret", "wrong"))
        ran = run_seglog("groups", "list", *where)
        assert ran.returncode == 1 and "Invalid username or password" in ran.stderr
    finally:
        broker.stop()


def test_share_group_read_from_a_data_dir(run_seglog, seglog_broker_factory, tmp_path):
    """A share group a seglog broker served, read from its data directory after the broker
    stopped: the same start offsets and lag as the broker answered; changes are refused."""
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)

    path = tmp_path / "data"
    broker = seglog_broker_factory(data_dir=path)
    bootstrap = broker.bootstrap
    topic, group = _names()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(WAIT_S)
    for future in admin.incremental_alter_configs([ConfigResource(
            ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
                "share.auto.offset.reset", "earliest",
                incremental_operation=AlterConfigOpType.SET)])]).values():
        future.result(WAIT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for n in range(2 * PER_PARTITION):
        producer.produce(topic, b"v%d" % n, partition=n % 2)
    assert producer.flush(WAIT_S) == 0
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got = 0

    def poll() -> bool:
        nonlocal got
        got += sum(1 for m in consumer.poll(0.2) if m.error() is None)
        return got >= 2 * PER_PARTITION
    try:
        _deadline_loop("share records", poll)
        consumer.commit_sync(WAIT_S)
    finally:
        consumer.close()
    ran = run_seglog("groups", "describe", group, "-b", bootstrap, "-o", "json")
    assert ran.returncode == 0, ran.stderr
    served = ran.json()["groups"][0]
    del admin, producer
    broker.stop()
    ran = run_seglog("groups", "describe", group, "--data-dir", str(path), "-o", "json")
    assert ran.returncode == 0, ran.stderr
    local = ran.json()["groups"][0]
    assert local["offsets"] == served["offsets"] and len(local["offsets"]) == 2
    assert (local["type"], local["state"]) == ("share", "Empty")
    listed = run_seglog("groups", "list", "--type", "share", "--data-dir", str(path),
                        "-o", "json").json()["groups"]
    assert [g["group"] for g in listed] == [group]
    ran = run_seglog("groups", "reset-offsets", group, "--all-topics", "--to-earliest",
                     "--execute", "--data-dir", str(path))
    assert ran.returncode == 1 and "use --bootstrap-server" in ran.stderr
