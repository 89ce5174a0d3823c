"""TLS against real Kafka 4.4 (issue 23): the same SSL setup (PEM keystore and truststore, one
listener with ``ssl.client.auth=requested`` and one with ``required`` through a listener
prefix) on Kafka's broker and on seglog gives every client the same visible answer: served
(an ApiVersions round trip after the handshake) or refused (the handshake fails, or the
connection is closed before an answer).

The cases: no client certificate, a good one, an expired one, one from a foreign CA, a client
that does not trust the broker's CA, plaintext Kafka on the TLS port, and TLSv1.1 only.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
from pathlib import Path

import pytest

from seglog import Broker
from seglog.bench.kafka import KafkaBroker, find_kafka

from core_helpers import read_frame, request_frame

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from security_certs import have_openssl, make_ca  # noqa: E402

pytestmark = [pytest.mark.kafka,
              pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1:DeprecationWarning"),
              pytest.mark.skipif(not have_openssl(), reason="needs the openssl command")]

WAIT_S = 20.0
CASES = ["no certificate", "good certificate", "expired certificate", "foreign certificate",
         "untrusted broker", "plaintext client", "TLSv1.1 only"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("certs")
    ca = make_ca(directory / "ca")
    foreign = make_ca(directory / "foreign", name="foreign-ca")
    return {"ca": ca, "foreign_ca": foreign, "broker": ca.issue("broker"),
            "good": ca.issue("good"), "expired": ca.issue("expired", days=-1),
            "foreign": foreign.issue("mallory")}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ssl_properties(certs, ssl_port: int, required_port: int) -> dict[str, str]:
    """The SSL part of a broker config, the same for both brokers."""
    return {
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
                                          "SSL_REQ:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs["broker"].pem_path),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs["ca"].cert_path),
        "ssl.client.auth": "requested",
        "listener.name.ssl_req.ssl.client.auth": "required",
    }


@pytest.fixture(scope="module")
def kafka_ports(certs, tmp_path_factory):
    ref, why = find_kafka()
    if ref is None:
        pytest.skip(why)
    ssl_port, required_port = _free_port(), _free_port()
    broker = KafkaBroker(ref, tmp_path_factory.mktemp("kafka"))
    listeners = (f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port},"
                 f"SSL_REQ://127.0.0.1:{required_port},"
                 f"CONTROLLER://127.0.0.1:{broker.controller_port}")
    extra = _ssl_properties(certs, ssl_port, required_port) | {
        "listeners": listeners, "advertised.listeners": listeners}
    with broker.properties_path.open("a", encoding="utf-8") as out:
        for key, value in extra.items():
            out.write(f"{key}={value}\n")  # the last of a repeated key wins
    broker.format()
    broker.start()
    yield {"SSL": ssl_port, "SSL_REQ": required_port}
    broker.stop()


@pytest.fixture(scope="module")
def seglog_ports(certs, tmp_path_factory):
    ssl_port, required_port = _free_port(), _free_port()
    config = _ssl_properties(certs, ssl_port, required_port) | {
        "listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port},"
                     f"SSL_REQ://127.0.0.1:{required_port}"}
    broker = Broker(tmp_path_factory.mktemp("seglog"), listen=("127.0.0.1", 0), config=config)
    broker.start()
    yield {"SSL": ssl_port, "SSL_REQ": required_port}
    broker.stop()


def outcome(certs, port: int, case: str) -> str:
    """``served`` or ``refused``: what the client sees."""
    if case == "plaintext client":
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
            sock.settimeout(WAIT_S)
            sock.sendall(request_frame(18, 0, 1))
            try:
                return "served" if read_frame(sock) is not None else "refused"
            except OSError:
                return "refused"
    ca = certs["foreign_ca"] if case == "untrusted broker" else certs["ca"]
    context = ssl.create_default_context(cafile=str(ca.cert_path))
    if case == "TLSv1.1 only":
        context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        context.maximum_version = ssl.TLSVersion.TLSv1_1  # deprecated: that is the point
        context.set_ciphers("ALL:@SECLEVEL=0")
    cert = {"good certificate": "good", "expired certificate": "expired",
            "foreign certificate": "foreign"}.get(case)
    if cert is not None:
        context.load_cert_chain(str(certs[cert].cert_path), str(certs[cert].key_path))
    raw = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    try:
        sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
    except (ssl.SSLError, OSError):
        raw.close()
        return "refused"
    with sock:
        sock.settimeout(WAIT_S)
        try:
            sock.sendall(request_frame(18, 0, 1))
            frame = read_frame(sock)
        except (ssl.SSLError, OSError):
            return "refused"
        return "served" if frame is not None and struct.unpack_from(">i", frame)[0] == 1 \
            else "refused"


@pytest.mark.parametrize("listener", ["SSL", "SSL_REQ"])
def test_same_answers_as_kafka(certs, kafka_ports, seglog_ports, listener):
    kafka = {case: outcome(certs, kafka_ports[listener], case) for case in CASES}
    seglog = {case: outcome(certs, seglog_ports[listener], case) for case in CASES}
    assert seglog == kafka
    # And what Kafka's rules say (so the comparison cannot pass with both broken).
    assert kafka["good certificate"] == "served"
    assert kafka["untrusted broker"] == kafka["plaintext client"] == "refused"
    assert kafka["no certificate"] == ("served" if listener == "SSL" else "refused")
