"""Fixtures of the broker tests: running ``seglog serve`` brokers in this process.

- ``broker``: an empty :class:`~seglog.server.broker.Broker` over ``tmp_path``, on 127.0.0.1
  and a free port, native storage backend; stopped (cleanly) after the test.
- ``any_backend_broker``: the same, parametrized over the storage backends (native, pure),
  for tests where storage behaviour matters (the data path).
- ``broker_factory(config=None, backend="native", data_dir=None, listen=None, **kafka_configs)``:
  more brokers, configured (Kafka names in ``config``, or keywords with underscores for dots:
  ``broker_factory(num_partitions=3)``), on either backend, over a given data dir (restart
  tests); each started one is stopped after the test (stopping one twice is harmless).

Every broker exposes ``.bootstrap`` ("127.0.0.1:<port>"), ``.port``, ``.store`` (the Store it
serves), ``.state`` (the BrokerState handlers see), ``.config`` and ``.api_ranges``.

The brokers run with Kafka's defaults except :data:`TEST_BROKER_CONFIG`: one partition for
``__consumer_offsets`` and ``__transaction_state`` (not 50) and no initial rebalance delay
(not 3 s), as Kafka's own integration tests do; override them through ``broker_factory``.

The pytest plugin (``seglog.pytest_plugin``, registered by the package's ``pytest11`` entry
point) offers users the same; these fixtures do not import it, so it is never registered twice.
"""

from __future__ import annotations

import pytest

from seglog.server.broker import Broker

BACKENDS = ("native", "pure")

#: Kafka broker configs every test broker starts with (see the module docstring).
TEST_BROKER_CONFIG = {
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture
def broker_factory(tmp_path_factory):
    """``factory(config=None, backend="native", data_dir=None, listen=None, **kafka_configs)``
    -> a started Broker (see the module docstring)."""
    started: list[Broker] = []

    def factory(config=None, backend="native", data_dir=None, listen=None, **kafka_configs):
        merged = dict(TEST_BROKER_CONFIG)
        merged.update(config or {})
        merged.update({name.replace("_", "."): value for name, value in kafka_configs.items()})
        path = data_dir if data_dir is not None else tmp_path_factory.mktemp("broker")
        broker = Broker(path, listen=listen or ("127.0.0.1", 0), config=merged, backend=backend)
        broker.start()
        started.append(broker)
        return broker

    try:
        yield factory
    finally:
        for broker in reversed(started):
            broker.stop()


@pytest.fixture
def broker(broker_factory, tmp_path):
    """An empty running broker over ``tmp_path`` (native backend)."""
    return broker_factory(data_dir=tmp_path / "data")


@pytest.fixture(params=BACKENDS)
def any_backend_broker(request, broker_factory, tmp_path):
    """An empty running broker over ``tmp_path``, once per storage backend."""
    return broker_factory(data_dir=tmp_path / "data", backend=request.param)
