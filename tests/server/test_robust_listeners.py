"""Listeners that are not built are refused, never served open (issue 23).

``listeners``, ``advertised.listeners``, ``listener.security.protocol.map`` and
``inter.broker.listener.name`` are read as Kafka 4.4 reads them; a listener whose security
protocol is not PLAINTEXT or SASL_PLAINTEXT (TLS is not built yet) and every security config (``ssl.*``,
``sasl.*``, ``authorizer.class.name``, ``super.users``, ``listener.name.*``, ...) stop
``seglog serve`` at start with a message naming the setting; a PLAINTEXT listener beyond
loopback logs a warning. The refusals are checked on ``seglog serve`` itself, as a
subprocess; the parsing on :func:`~seglog.server.listeners.broker_listeners`.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading

import pytest

from seglog.errors import InvalidConfigError
from seglog.server.broker import Broker
from seglog.server.config import BrokerConfig
from seglog.server.listeners import broker_listeners, is_loopback

#: Bounds on a ``seglog serve`` subprocess (a loaded 2-core machine).
EXIT_TIMEOUT_S = 60.0
START_TIMEOUT_S = 60.0
LISTENING = re.compile(r"listening on \S+:(\d+)")


def _serve(*args: str) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "..",
                                                      "src"), env.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-m", "seglog", "serve", *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, text=True)


# --- parsing as Kafka ------------------------------------------------------------------------


def test_default_is_one_plaintext_listener():
    listeners = broker_listeners(BrokerConfig())
    served = listeners.served
    assert (served.listener_name, served.security_protocol, served.host, served.port) == (
        "PLAINTEXT", "PLAINTEXT", None, 9092)
    assert listeners.inter_broker_listener_name == "PLAINTEXT"
    assert listeners.advertised is None and listeners.controller == ()


def test_named_listeners_map_to_their_protocol():
    listeners = broker_listeners(BrokerConfig({
        "listeners": "client://127.0.0.1:9092",
        "advertised.listeners": "CLIENT://kafka.example:19092",
        "listener.security.protocol.map": "CLIENT : plaintext , OTHER:SSL",
        "inter.broker.listener.name": "client"}))
    assert (listeners.served.listener_name, listeners.served.host) == ("CLIENT", "127.0.0.1")
    assert (listeners.advertised.host, listeners.advertised.port) == ("kafka.example", 19092)
    assert listeners.inter_broker_listener_name == "CLIENT"


def test_kafkas_sample_server_properties_serves_its_broker_listener():
    # Kafka 4.4's config/server.properties: a combined broker and KRaft controller.
    listeners = broker_listeners(BrokerConfig({
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "advertised.listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"}))
    assert listeners.served.listener_name == "PLAINTEXT"
    assert [e.listener_name for e in listeners.controller] == ["CONTROLLER"]
    # With the default map, a controller listener is PLAINTEXT (KRaft's rule).
    assert broker_listeners(BrokerConfig({
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "controller.listener.names": "CONTROLLER"})).served.listener_name == "PLAINTEXT"


@pytest.mark.parametrize("configs, message", [
    ({"listeners": "PLAINTEXT://nohostport"}, "Unable to parse PLAINTEXT://nohostport"),
    ({"listeners": "CLIENT://:9092"}, "No security protocol defined for listener CLIENT"),
    ({"listeners": "PLAINTEXT://:9092,plaintext://:9093"},
     "Each listener must have a different name"),
    ({"listeners": "PLAINTEXT://:9092,OTHER://:9092",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"},
     "Each listener must have a different port"),
    ({"listener.security.protocol.map": "PLAINTEXT:PLAIN"}, "Invalid security protocol"),
    ({"listener.security.protocol.map": "PLAINTEXT"}, "listener.security.protocol.map"),
    ({"advertised.listeners": "OTHER://h:1",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"},
     "inter.broker.listener.name must be a listener name defined in advertised.listeners"),
    ({"advertised.listeners": "PLAINTEXT://h:1,OTHER://h:2",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"},
     "must be equal to or a subset of the ones defined in listeners"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "0.0.0.0"),
    ({"inter.broker.listener.name": "NOPE"}, "NOPE defined in inter.broker.listener.name"),
    ({"listeners": "A://127.0.0.1:1,B://127.0.0.1:2",
      "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
      "inter.broker.listener.name": "A"}, "seglog serves one broker listener, not 2"),
])
def test_kafkas_listener_rules(configs, message):
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        broker_listeners(BrokerConfig(configs))


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("", False),
    ("192.168.1.5", False), ("kafka.example", False)])
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_a_broker_refuses_before_touching_its_directory(tmp_path):
    with pytest.raises(InvalidConfigError, match="security protocol SASL_SSL"):
        Broker(tmp_path / "d", listen=("127.0.0.1", 0),
               config={"listeners": "SASL_SSL://127.0.0.1:0"})
    assert not (tmp_path / "d").exists()


# --- seglog serve refuses, naming the setting ------------------------------------------------

REFUSED = [
    (["--config", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
      "--config", "inter.broker.listener.name=SASL_PLAINTEXT"],
     "SASL mechanism GSSAPI (Kafka's default) on listener SASL_PLAINTEXT is not built by "
     "seglog"),
    (["--config", "listeners=SSL://127.0.0.1:0"], "security protocol SSL) is refused"),
    (["--config", "listeners=SASL_SSL://127.0.0.1:0"],
     "security protocol SASL_SSL) is refused: seglog serves PLAINTEXT and SASL_PLAINTEXT "
     "listeners only; TLS is not built yet"),
    # --listen names the address only: the listener's settings are still checked.
    (["--listen", "127.0.0.1:0", "--config", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
      "--config", "inter.broker.listener.name=SASL_PLAINTEXT"],
     "SASL mechanism GSSAPI (Kafka's default) on listener SASL_PLAINTEXT"),
    (["--config", "listeners=CLIENT://127.0.0.1:0",
      "--config", "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT",
      "--config", "inter.broker.listener.name=CLIENT"],
     "SASL mechanism GSSAPI (Kafka's default) on listener CLIENT"),
    (["--config", "advertised.listeners=SSL://kafka.example:9093",
      "--config", "listeners=PLAINTEXT://127.0.0.1:0"],
     "advertised.listeners: listener SSL://kafka.example:9093"),
    (["--config", "ssl.keystore.location=/etc/kafka/broker.pem"],
     "ssl.keystore.location is not implemented by seglog: TLS is not built yet"),
    (["--config", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
      "--config", "inter.broker.listener.name=SASL_PLAINTEXT",
      "--config", "sasl.enabled.mechanisms=PLAIN"],
     "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set"),
    (["--config", "sasl.kerberos.service.name=kafka"],
     "sasl.kerberos.service.name is not implemented by seglog: this SASL setting"),
    (["--config", "authorizer.class.name="
                  "org.apache.kafka.metadata.authorizer.StandardAuthorizer"],
     "authorizer.class.name is not implemented by seglog: authorization (ACLs) is not built"),
    (["--config", "super.users=User:admin"],
     "super.users is not implemented by seglog: authorization (ACLs) is not built yet"),
    (["--config", "listener.name.sasl_plaintext.sasl.kerberos.service.name=kafka"],
     "listener.name.sasl_plaintext.sasl.kerberos.service.name: Kafka broker config "
     "sasl.kerberos.service.name is not implemented by seglog"),
]


@pytest.mark.parametrize("args, message", REFUSED, ids=[a[-1].split("=")[0] for a, _ in REFUSED])
def test_serve_refuses_at_start(tmp_path, args, message):
    proc = _serve("--data-dir", str(tmp_path / "d"), *args)
    try:
        out, _ = proc.communicate(timeout=EXIT_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 2, out
    assert message in out, out
    assert "listening on" not in out
    assert not (tmp_path / "d").exists()


# --- the warning ---------------------------------------------------------------------------


def _start_reading(proc: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _lines_until_listening(proc: subprocess.Popen, lines: queue.Queue) -> list[str]:
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            line = None
        if line is None:
            proc.kill()
            raise AssertionError("seglog serve did not start:\n" + "".join(seen))
        seen.append(line)
        if LISTENING.search(line):
            return seen


@pytest.mark.parametrize("listener, warned", [
    ("PLAINTEXT://0.0.0.0:0", True),  # a port from the OS; stopped at once
    ("PLAINTEXT://127.0.0.1:0", False),
])
def test_plaintext_beyond_loopback_logs_a_warning(tmp_path, listener, warned):
    proc = _serve("--data-dir", str(tmp_path / "d"), "--config", f"listeners={listener}")
    lines = _start_reading(proc)
    try:
        seen = _lines_until_listening(proc, lines)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    warnings = [line for line in seen if "WARNING" in line and "not a loopback address" in line]
    assert bool(warnings) is warned, "".join(seen)
    if warned:
        assert "PLAINTEXT listener PLAINTEXT bound to 0.0.0.0" in warnings[0]
        assert "anyone who can reach it can read, write and delete every topic" in warnings[0]
    assert proc.returncode == 0
