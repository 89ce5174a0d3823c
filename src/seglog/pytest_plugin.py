"""pytest fixtures that start a real Kafka-protocol broker (``seglog serve``) for a test.

Registered through the ``pytest11`` entry point, so installing seglog makes them available to
every test suite (disable with ``-p no:seglog``). Each broker is an empty
:class:`seglog.Broker` over a temporary data directory, listening on 127.0.0.1 on a free port,
started in milliseconds (no Docker, no JVM), and stopped cleanly after the test. Any Kafka
client connects to it unmodified: confluent-kafka, kafka-python, aiokafka, kcat, Kafka's own
Java clients.

Fixtures:

``seglog_broker``
    A broker for one test (function scope). ``seglog_broker.bootstrap`` is its
    ``"host:port"``; ``seglog_broker.store`` the :class:`~seglog.store.Store` it serves (read
    what clients wrote, or create topics directly).
``seglog_bootstrap``
    Just the ``"host:port"`` string of ``seglog_broker`` (for ``bootstrap.servers``).
``seglog_broker_session``
    One broker shared by every test of the session (topics and groups carry over: use unique
    names per test).
``seglog_broker_factory``
    A function ``factory(**config)`` that starts more brokers with Kafka broker configs given
    as keyword arguments with dots as underscores (``factory(num_partitions=3,
    auto_create_topics_enable=False)``) or as a ``config={...}`` dict with Kafka's names;
    ``backend="pure"`` picks the pure-Python storage. All are stopped after the test.

Example::

    def test_roundtrip(seglog_bootstrap):
        from confluent_kafka import Consumer, Producer
        producer = Producer({"bootstrap.servers": seglog_bootstrap})
        producer.produce("events", b"hello")
        producer.flush(10)
        ...

The brokers use Kafka's defaults except ``offsets.topic.num.partitions`` and
``transaction.state.log.num.partitions`` (1 instead of 50, so the first group commit or
transaction does not create 50 partitions) and ``group.initial.rebalance.delay.ms`` (0 instead
of 3000, so a consumer group forms at once); pass them to the factory to change them.
"""

from __future__ import annotations

import importlib
import tempfile
from typing import Any, Callable, Iterator

import pytest

__all__ = ["TEST_BROKER_CONFIG", "seglog_bootstrap", "seglog_broker", "seglog_broker_factory",
           "seglog_broker_session"]

#: Kafka broker configs the fixtures' brokers start with (see the module docstring).
TEST_BROKER_CONFIG = {
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
}


def _broker_class() -> Any:
    # Imported when a fixture is used, not when pytest loads the plugin: a test run that uses
    # none of these fixtures never imports the server.
    return importlib.import_module("seglog.server.broker").Broker


def _config_from_kwargs(config: dict | None, kwargs: dict) -> dict:
    merged = dict(TEST_BROKER_CONFIG)
    merged.update(config or {})
    for name, value in kwargs.items():
        merged[name.replace("_", ".")] = value
    return merged


def _start(data_dir: str, config: dict, backend: Any = None) -> Any:
    return _broker_class()(data_dir, listen=("127.0.0.1", 0), config=config,
                           backend=backend).start()


@pytest.fixture
def seglog_broker_factory(tmp_path_factory) -> Iterator[Callable[..., Any]]:
    """``factory(config=None, backend=None, data_dir=None, **kafka_configs)``: start an empty
    broker (or one over ``data_dir``) on 127.0.0.1 and a free port; every broker it started
    is stopped after the test. Keyword configs use underscores for dots
    (``num_partitions=3``); names with underscores of their own go in ``config``."""
    started: list[Any] = []

    def factory(config: dict | None = None, backend: Any = None, data_dir: Any = None,
                **kafka_configs: Any) -> Any:
        path = data_dir if data_dir is not None else tmp_path_factory.mktemp("seglog-broker")
        broker = _start(path, _config_from_kwargs(config, kafka_configs), backend)
        started.append(broker)
        return broker

    try:
        yield factory
    finally:
        for broker in reversed(started):
            broker.stop()


@pytest.fixture
def seglog_broker(seglog_broker_factory) -> Any:
    """An empty :class:`seglog.Broker` on 127.0.0.1 and a free port, for one test."""
    return seglog_broker_factory()


@pytest.fixture
def seglog_bootstrap(seglog_broker) -> str:
    """``"127.0.0.1:<port>"`` of :func:`seglog_broker`, for ``bootstrap.servers``."""
    return seglog_broker.bootstrap


@pytest.fixture(scope="session")
def seglog_broker_session() -> Iterator[Any]:
    """One empty broker for the whole test session (stopped at its end)."""
    with tempfile.TemporaryDirectory(prefix="seglog-session-") as data_dir:
        broker = _start(data_dir, dict(TEST_BROKER_CONFIG))
        try:
            yield broker
        finally:
            broker.stop()
