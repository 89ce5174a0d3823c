"""The Broker object: listen addresses, properties before and after serving, restarts over
the same data directory, node ids, the lazy ``seglog.Broker`` export."""

from __future__ import annotations

import sys

import pytest

import seglog
from seglog.errors import InvalidConfigError
from seglog.server.broker import Broker, parse_listen


@pytest.mark.parametrize("value, expected", [
    (("127.0.0.1", 0), ("127.0.0.1", 0)),
    ("localhost:9092", ("localhost", 9092)),
    ("PLAINTEXT://:9093", ("0.0.0.0", 9093)),
    ("[::1]:9094", ("::1", 9094)),
    (["h", 1], ("h", 1)),
])
def test_parse_listen(value, expected):
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", ["nowhere", "h:port", "h:70000", ("h", -1), ("h", "1"),
                                   ("h", True), 9092, (None, 1)])
def test_parse_listen_refuses(value):
    with pytest.raises(InvalidConfigError):
        parse_listen(value)


def test_properties_need_a_running_broker(tmp_path):
    broker = Broker(tmp_path, listen=("127.0.0.1", 0))
    for name in ("bootstrap", "port", "store", "state", "api_ranges", "loop", "server"):
        with pytest.raises(RuntimeError):
            getattr(broker, name)
    broker.stop()  # never started: nothing to do
    assert repr(broker).endswith("new)")


def test_a_broker_serves_once(broker):
    with pytest.raises(RuntimeError):
        broker.start()
    broker.stop()
    broker.stop()  # idempotent
    with pytest.raises(RuntimeError):
        broker.start()


def test_listeners_config_is_the_default_listen_address(tmp_path, broker_factory):
    broker = broker_factory(data_dir=tmp_path / "d", listen=None,
                            config={"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert broker.bootstrap == f"127.0.0.1:{broker.port}" and broker.port != 0


def test_advertised_listeners_are_what_handlers_see(broker_factory):
    broker = broker_factory(advertised_listeners="PLAINTEXT://kafka.example:19092")
    assert (broker.state.host, broker.state.port) == ("kafka.example", 19092)
    assert broker.bootstrap == f"127.0.0.1:{broker.port}"


def test_state_carries_the_store_identity_and_config(broker):
    state = broker.state
    assert state.store is broker.store
    assert state.node_id == broker.store.meta.node_id == 1
    assert state.cluster_id == broker.store.meta.cluster_id
    assert (state.host, state.port) == ("127.0.0.1", broker.port)
    assert state.config["num.partitions"] == 1


def test_restart_keeps_identity_and_refuses_another_node_id(tmp_path, broker_factory):
    first = broker_factory(data_dir=tmp_path / "d", node_id=3)
    cluster_id = first.state.cluster_id
    assert first.state.node_id == 3
    first.stop()
    again = broker_factory(data_dir=tmp_path / "d")
    assert (again.state.node_id, again.state.cluster_id) == (3, cluster_id)
    again.stop()
    with pytest.raises(InvalidConfigError, match="node id"):
        broker_factory(data_dir=tmp_path / "d", broker_id=4)


def test_bad_config_is_refused_at_construction(tmp_path):
    with pytest.raises(InvalidConfigError, match="did you mean"):
        Broker(tmp_path, config={"num.partition": 2})
    assert not any(tmp_path.iterdir())


def test_seglog_broker_is_exported_lazily():
    assert seglog.Broker is Broker
    assert "Broker" in seglog.__all__
    code = "import seglog, sys; print('seglog.server' in sys.modules)"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60).stdout.strip()
    assert out == "False"
