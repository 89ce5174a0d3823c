"""Fixtures of the share-group scenarios (issue 25, "Tests"): the same scenario against a real
Kafka 4.4 broker and against ``seglog serve``.

- ``share_broker`` (module scope, parametrized ``kafka`` / ``seglog``): one running broker per
  module and kind, a :class:`ShareBroker`. Kafka is :class:`seglog.bench.kafka.KafkaBroker`
  (single-node KRaft, from ``tests/kafka/conftest.py``'s factory); seglog is a
  ``python -m seglog serve`` process (:class:`seglog.bench.broker.SeglogServe`) importing this
  checkout's ``src``. Both run with Kafka's share-group defaults (:data:`BROKER_CONFIG` is
  empty: what a scenario changes it changes through group configs, as a user would). Both can
  be killed with SIGKILL and restarted on their data dir and port
  (:meth:`ShareBroker.kill_and_restart`).
- ``share_java``: ``(java, classpath)`` of the Java driver, compiled once per session.

Topics and groups are made per test with unique names (:meth:`ShareBroker.new_topic`), the
group's ``share.auto.offset.reset=earliest`` set through IncrementalAlterConfigs on the GROUP
resource as a user would (:meth:`ShareBroker.set_group_configs`).
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import pytest

from seglog.bench.broker import SeglogServe

from share_driver import compile_java, env_with_src

import confluent_kafka  # noqa: E402  (a test dependency: pyproject's [test] extra)
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType)

#: Broker configs both brokers run with (Kafka's names and meaning): none beyond a single
#: node's; the share-group settings are Kafka's defaults.
BROKER_CONFIG: dict[str, str] = {}
#: seglog's equivalents of what ``KafkaBroker``'s server.properties sets for a single node.
SEGLOG_SINGLE_NODE = {
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
KINDS = ("kafka", "seglog")
ADMIN_TIMEOUT_S = 30.0

_names = itertools.count(1)


class ShareBroker:
    """A running broker of ``kind`` ("kafka" or "seglog") with the admin steps the scenarios
    need (confluent-kafka's AdminClient and Producer)."""

    def __init__(self, kind: str, server):
        self.kind = kind
        self.server = server

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>`` (kept across restarts)."""
        return self.server.bootstrap

    def admin(self) -> AdminClient:
        """A fresh AdminClient."""
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def new_topic(self, prefix: str, partitions: int = 1, records: int = 0,
                  config: dict[str, str] | None = None) -> str:
        """Create a topic with a unique name (and topic ``config``) and produce ``records``
        records to partition 0 (values ``b"%06d" % i``); its name."""
        name = f"{prefix}-{os.getpid()}-{next(_names)}"
        admin = self.admin()  # kept alive until the futures are done
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1,
                      config=dict(config or {}))],
            request_timeout=ADMIN_TIMEOUT_S)
        futures[name].result(ADMIN_TIMEOUT_S)
        if records:
            self.produce(name, records)
        return name

    def produce(self, topic: str, records: int, partition: int = 0) -> None:
        """``records`` acks=all records to ``topic``'s ``partition``."""
        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                                             "linger.ms": 5})
        errors: list[str] = []
        for i in range(records):
            producer.produce(topic, b"%06d" % i, partition=partition,
                             on_delivery=lambda err, _msg: err and errors.append(str(err)))
            producer.poll(0)
        assert producer.flush(ADMIN_TIMEOUT_S) == 0 and not errors, errors[:5]

    def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        """IncrementalAlterConfigs SET of group configs (resource type GROUP)."""
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in configs.items()]
        admin = self.admin()
        futures = admin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)],
            request_timeout=ADMIN_TIMEOUT_S)
        for future in futures.values():
            future.result(ADMIN_TIMEOUT_S)

    def new_group(self, prefix: str, **configs: str) -> str:
        """A unique group name with ``share.auto.offset.reset=earliest`` and ``configs``
        (underscores for dots) set."""
        group = f"{prefix}-{os.getpid()}-{next(_names)}"
        wanted = {"share.auto.offset.reset": "earliest"}
        wanted.update({k.replace("_", "."): v for k, v in configs.items()})
        self.set_group_configs(group, wanted)
        return group

    def kill_and_restart(self) -> float:
        """SIGKILL the broker process (by pid), start it again on the same data dir and port;
        the seconds the restart took."""
        self.server.kill()
        t0 = time.monotonic()
        self.server.start()
        return time.monotonic() - t0

    def log_tail(self) -> str:
        """The last lines of the broker's output."""
        return self.server.log_tail(60)


@pytest.fixture(scope="session")
def share_java(kafka_ref, tmp_path_factory):
    """``(java, classpath)`` of the Java share-consumer driver (compiled once)."""
    return compile_java(kafka_ref, tmp_path_factory.mktemp("share-java"))


@pytest.fixture(scope="module", params=KINDS)
def share_broker(request, tmp_path_factory):
    """A running broker per module and kind (see the module docstring)."""
    if request.param == "kafka":
        factory = request.getfixturevalue("kafka_broker_factory")
        server = factory("share", **BROKER_CONFIG)
        server.start()
        yield ShareBroker("kafka", server)
        server.stop()
        return
    data_dir: Path = tmp_path_factory.mktemp("seglog-share") / "data"
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env_with_src()["PYTHONPATH"]
    server = SeglogServe(data_dir, config={**SEGLOG_SINGLE_NODE, **BROKER_CONFIG})
    try:
        server.start()
        yield ShareBroker("seglog", server)
    finally:
        server.stop()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    broker = getattr(item, "funcargs", {}).get("share_broker")
    if report.failed and isinstance(broker, ShareBroker) and broker.kind == "seglog":
        report.sections.append((f"seglog serve output ({broker.server.log_path}), last lines",
                                broker.log_tail()))


#: Set to run the ``kafka_share`` tests without ``-m kafka_share``.
SELECT_ENV = "SEGLOG_KAFKA_SHARE"


def pytest_collection_modifyitems(config, items):
    """The ``kafka_share`` scenarios take minutes: they run when ``-m`` names the marker (as
    .ci/run does) or ``SEGLOG_KAFKA_SHARE=1``, else skip with one line."""
    if (os.environ.get(SELECT_ENV, "") not in ("", "0")
            or "kafka_share" in (config.option.markexpr or "")):
        return
    skip = pytest.mark.skip(reason=f"the share-group scenarios take minutes: run them with "
                                   f"-m kafka_share or {SELECT_ENV}=1")
    for item in items:
        if item.get_closest_marker("kafka_share") is not None:
            item.add_marker(skip)
