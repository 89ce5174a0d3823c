"""The pytest plugin users get (``seglog.pytest_plugin``, registered by the ``pytest11``
entry point): its fixtures give a running, empty broker that a real client talks to."""

from __future__ import annotations

import importlib.metadata
import socket
import struct

from core_helpers import read_frame, request_frame


def test_the_entry_point_names_the_plugin():
    entry_points = [e for e in importlib.metadata.entry_points(group="pytest11")
                    if e.name == "seglog"]
    assert [e.value for e in entry_points] == ["seglog.pytest_plugin"]


def test_the_plugin_is_registered_once(pytestconfig):
    plugins = [p for p in pytestconfig.pluginmanager.get_plugins()
               if getattr(p, "__name__", "") == "seglog.pytest_plugin"]
    assert len(plugins) == 1


def test_seglog_bootstrap_is_a_listening_broker(seglog_bootstrap, seglog_broker):
    host, port = seglog_bootstrap.rsplit(":", 1)
    assert (host, int(port)) == ("127.0.0.1", seglog_broker.port)
    assert seglog_broker.store.topics() == []
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.settimeout(10)
        sock.sendall(request_frame(18, 0, 42))
        frame = read_frame(sock)
    assert struct.unpack_from(">ih", frame) == (42, 0)


def test_seglog_broker_factory_takes_kafka_configs(seglog_broker_factory):
    broker = seglog_broker_factory(num_partitions=3, config={"auto.create.topics.enable": False},
                                   backend="pure")
    assert broker.config["num.partitions"] == 3
    assert broker.config["auto.create.topics.enable"] is False
    assert broker.store.backend == "pure"


def test_session_broker_is_shared(seglog_broker_session, request):
    assert seglog_broker_session is request.getfixturevalue("seglog_broker_session")
    assert seglog_broker_session.bootstrap.startswith("127.0.0.1:")

