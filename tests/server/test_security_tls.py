"""TLS listeners (issue 23): Kafka's PEM ssl.* configs, several listeners, the principal of a
client certificate, and every way a TLS connection fails (a clear error for the client, one
log line on the broker, every other client served).

Certificates are made at test time with ``openssl`` (tests/security_certs.py). The brokers
run in this process, so the log lines are caught with ``caplog`` and the principal of a
connection is read where every request's context gets it (``connection.security``, the
object each RequestContext carries). The clients here are Python's ``ssl`` and raw Kafka
frames (what each client library sees is tests/server/clients/test_clients_tls.py).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
import sys
import time
from pathlib import Path

import pytest

from seglog import Broker
from seglog.errors import InvalidConfigError
from seglog.server import connection as connection_module
from seglog.server import tls
from seglog.server.config import BrokerConfig
from seglog.server.principal import ANONYMOUS, KafkaPrincipal

from core_helpers import read_frame, request_frame, run_on_broker_loop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from security_certs import have_openssl, make_ca  # noqa: E402

pytestmark = pytest.mark.skipif(not have_openssl(), reason="needs the openssl command")

API_VERSIONS = 18
METADATA = 3
FETCH = 1
WAIT_S = 20.0
MIB = 1 << 20
TOPIC = "t"


# --- certificates and brokers ----------------------------------------------------------------


class Certs:
    """The module's certificates: a CA, the broker's, good, expired and foreign clients'."""

    def __init__(self, directory: Path):
        self.ca = make_ca(directory / "ca")
        self.broker = self.ca.issue("broker")
        self.broker_encrypted = self.ca.issue("broker-enc", key_password="s3cret")
        self.alice = self.ca.issue("alice", subject="/C=NO/O=seglog/OU=eng/CN=alice")
        self.expired = self.ca.issue("expired", days=-1)
        self.foreign_ca = make_ca(directory / "foreign", name="foreign-ca")
        self.foreign = self.foreign_ca.issue("mallory")
        self.foreign_broker = self.foreign_ca.issue("foreign-broker")


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return Certs(tmp_path_factory.mktemp("certs"))


def ssl_config(certs: Certs, **extra: str) -> dict[str, str]:
    """A broker config with PLAINTEXT and SSL listeners on free ports and the PEM stores."""
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
              "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker.pem_path),
              "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca.cert_path),
              "offsets.topic.num.partitions": "1"}
    config.update({name.replace("_", "."): value for name, value in extra.items()})
    return config


@pytest.fixture
def start_broker(tmp_path):
    started: list[Broker] = []

    def start(config: dict[str, str]) -> Broker:
        broker = Broker(tmp_path / f"data{len(started)}", listen=("127.0.0.1", 0),
                        config=config)
        broker.start()
        started.append(broker)
        return broker

    try:
        yield start
    finally:
        for broker in reversed(started):
            broker.stop()


def client_context(certs: Certs, *, ca=None, cert=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str((ca or certs.ca).cert_path))
    if cert is not None:
        context.load_cert_chain(str(cert.cert_path), str(cert.key_path))
    return context


def tls_connect(broker: Broker, context: ssl.SSLContext) -> ssl.SSLSocket:
    raw = socket.create_connection(broker.listener_address("SSL"), timeout=WAIT_S)
    try:
        sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
    except BaseException:
        raw.close()
        raise
    sock.settimeout(WAIT_S)
    return sock


def api_versions_ok(sock: socket.socket, correlation_id: int = 1) -> bool:
    """An ApiVersions round trip on ``sock``: True when answered."""
    sock.sendall(request_frame(API_VERSIONS, 0, correlation_id))
    frame = read_frame(sock)
    return frame is not None and struct.unpack_from(">ih", frame) == (correlation_id, 0)


def served_over_tls(broker: Broker, certs: Certs) -> bool:
    """Another client (no certificate) is served meanwhile."""
    with tls_connect(broker, client_context(certs)) as sock:
        return api_versions_ok(sock, 99)


def principals(broker: Broker) -> dict[int, KafkaPrincipal]:
    async def read() -> dict[int, KafkaPrincipal]:
        return {cid: c.security.principal for cid, c in broker.server.connections.items()}
    return run_on_broker_loop(broker, read())


def wait_until(predicate, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.02)


def failures(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "seglog.server" and "Failed authentication" in r.getMessage()]


# --- the principal mapping rules (Kafka's SslPrincipalMapperTest) ---------------------------


@pytest.mark.parametrize("rules", [
    "DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/", "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/"])
def test_valid_mapping_rules(rules):
    tls.PrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU"])
def test_invalid_mapping_rules(rules):
    with pytest.raises(InvalidConfigError, match="Invalid rule"):
        tls.PrincipalMapper(rules)


def test_mapping_as_kafka_maps():
    mapper = tls.PrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT"]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"
    comma = tls.PrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert comma.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"
    # A back reference past the last group is literal (Kafka's escapeLiteralBackReferences).
    assert tls.PrincipalMapper("RULE:^CN=(.*)$/$1@$4/").name("CN=x") == "x@$4"
    with pytest.raises(LookupError, match="No rules apply"):
        tls.PrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=x")


def test_subject_dn_as_java_writes_it(certs, tmp_path):
    ca = certs.ca
    assert tls.subject_dn(ssl.PEM_cert_to_DER_cert(certs.alice.chain_pem.split(
        "-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n")) \
        == "CN=alice,OU=eng,O=seglog,C=NO"
    odd = ca.issue("odd", subject="/O=a\\+b, \"c\"/emailAddress=x@y.z/CN=#lead ")
    der = ssl.PEM_cert_to_DER_cert(odd.chain_pem.split("-----END CERTIFICATE-----")[0]
                                   + "-----END CERTIFICATE-----\n")
    # Java: unknown keywords as <oid>=#<DER hex>; specials escaped with a backslash.
    assert tls.subject_dn(der) == ("CN=\\#lead\\ ,1.2.840.113549.1.9.1=#1605"
                                   + b"x@y.z".hex() + ",O=a\\+b\\, \\\"c\\\"")
    with pytest.raises(ValueError):
        tls.subject_dn(b"\x30\x03\x02\x01\x01")


# --- configs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("extra, message", [
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type=JKS (listener SSL) is not supported"),
    ({"ssl.keystore.type": "PKCS12"}, "only PEM stores are read"),
    ({"ssl.truststore.type": "JKS"}, "ssl.truststore.type=JKS (listener SSL)"),
    ({"ssl.keystore.location": None}, "listener SSL (TLS) has no key and certificate"),
    ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}, "TLSv1.1 (listener SSL) is refused"),
    ({"ssl.protocol": "SSLv3"}, "ssl.protocol=SSLv3 (listener SSL) is refused"),
    ({"ssl.keystore.password": "x"}, "SSL key store password cannot be specified with PEM"),
    ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
    ({"ssl.principal.mapping.rules": "RULE:x/y/LU"}, "Invalid rule"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, "cannot load the key and certificate"),
    ({"listener.name.ssl.ssl.keystore.type": "JKS"},
     "listener.name.ssl.ssl.keystore.type=JKS (listener SSL)"),
    ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, "ssl.cipher.suites is not implemented"),
])
def test_refused_at_construction(certs, tmp_path, extra, message):
    config = ssl_config(certs)
    for name, value in extra.items():
        if value is None:
            config.pop(name)
        else:
            config[name] = value
    with pytest.raises(InvalidConfigError, match=message.replace("(", r"\(").replace(
            ")", r"\)").replace("+", r"\+")):
        Broker(tmp_path / "d", listen=("127.0.0.1", 0), config=config)
    assert not (tmp_path / "d").exists()


def test_keystore_forms(certs):
    # ssl.keystore.location, the PEM text in the config, an encrypted key, listener prefixes.
    for config in (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker.pem_path)},
            {"ssl.keystore.type": "PEM", "ssl.keystore.key": certs.broker.key_pem,
             "ssl.keystore.certificate.chain": certs.broker.chain_pem},
            {"listener.name.ssl.ssl.keystore.type": "PEM",
             "listener.name.ssl.ssl.keystore.location": str(certs.broker_encrypted.pem_path),
             "listener.name.ssl.ssl.key.password": "s3cret",
             "ssl.truststore.type": "PEM", "ssl.truststore.certificates": certs.ca.cert_pem}):
        context = tls.server_context(BrokerConfig(config), "SSL")
        assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    with pytest.raises(InvalidConfigError, match="cannot load the key"):
        tls.server_context(BrokerConfig({
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker_encrypted.pem_path),
            "ssl.key.password": "wrong"}), "SSL")


# --- several listeners -----------------------------------------------------------------------


def test_each_listener_answers_its_own_endpoints(certs, start_broker):
    from confluent_kafka.admin import AdminClient

    broker = start_broker(ssl_config(certs))
    plain_port = broker.listener_address("PLAINTEXT")[1]
    ssl_port = broker.listener_address("SSL")[1]
    assert broker.port == plain_port and broker.listener_names == ["PLAINTEXT", "SSL"]
    plain = AdminClient({"bootstrap.servers": broker.listener_bootstrap("PLAINTEXT")})
    md = plain.list_topics(timeout=WAIT_S)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", plain_port)]
    over_tls = AdminClient({"bootstrap.servers": broker.listener_bootstrap("SSL"),
                            "security.protocol": "SSL",
                            "ssl.ca.location": str(certs.ca.cert_path)})
    md = over_tls.list_topics(timeout=WAIT_S)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", ssl_port)]
    cluster = over_tls.describe_cluster(request_timeout=WAIT_S).result(WAIT_S)
    assert [(n.host, n.port) for n in cluster.nodes] == [("127.0.0.1", ssl_port)]


@pytest.fixture
def advertising_broker(certs, start_broker, tmp_path):
    """A broker whose listeners advertise other names (localhost for SSL)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    plain_port, ssl_port = probe.getsockname()[1], other.getsockname()[1]
    probe.close()
    other.close()
    config = ssl_config(certs)
    config["listeners"] = f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}"
    config["advertised.listeners"] = (f"PLAINTEXT://127.0.0.1:{plain_port},"
                                      f"SSL://localhost:{ssl_port}")
    broker = Broker(tmp_path / "adv", config=config)
    broker.start()
    yield broker, plain_port, ssl_port
    broker.stop()


def test_advertised_endpoint_per_listener(certs, advertising_broker):
    from confluent_kafka.admin import AdminClient

    broker, plain_port, ssl_port = advertising_broker
    assert broker.listener_address("SSL") == ("127.0.0.1", ssl_port)
    over_tls = AdminClient({"bootstrap.servers": f"localhost:{ssl_port}",
                            "security.protocol": "SSL",
                            "ssl.ca.location": str(certs.ca.cert_path)})
    md = over_tls.list_topics(timeout=WAIT_S)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("localhost", ssl_port)]
    plain = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_port}"})
    md = plain.list_topics(timeout=WAIT_S)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", plain_port)]


# --- principals ------------------------------------------------------------------------------


def test_principal_of_a_client_certificate(certs, start_broker):
    broker = start_broker(ssl_config(certs, ssl_client_auth="requested"))
    with tls_connect(broker, client_context(certs, cert=certs.alice)) as with_cert, \
            tls_connect(broker, client_context(certs)) as without:
        assert api_versions_ok(with_cert) and api_versions_ok(without)
        with socket.create_connection(broker.listener_address("PLAINTEXT"),
                                      timeout=WAIT_S) as plain:
            plain.settimeout(WAIT_S)
            assert api_versions_ok(plain)
            assert sorted(map(str, principals(broker).values())) == [
                "User:ANONYMOUS", "User:ANONYMOUS", "User:CN=alice,OU=eng,O=seglog,C=NO"]

            # What each connection's requests carry: its listener and protocol too.
            async def securities():
                return sorted((c.security.listener_name, c.security.security_protocol,
                               c.security.uses_tls)
                              for c in broker.server.connections.values())
            assert run_on_broker_loop(broker, securities()) == [
                ("PLAINTEXT", "PLAINTEXT", False), ("SSL", "SSL", True), ("SSL", "SSL", True)]


def test_principal_mapping_rules(certs, start_broker):
    broker = start_broker(ssl_config(
        certs, ssl_client_auth="required",
        **{"listener.name.ssl.ssl.principal.mapping.rules":
           "RULE:^CN=([^,]*),OU=eng,.*$/$1/U,DEFAULT"}))
    with tls_connect(broker, client_context(certs, cert=certs.alice)) as sock:
        assert api_versions_ok(sock)
        assert list(principals(broker).values()) == [KafkaPrincipal("User", "ALICE")]


def test_no_rule_applies_closes_the_connection(certs, start_broker, caplog):
    caplog.set_level(logging.INFO, logger="seglog.server")
    broker = start_broker(ssl_config(certs, ssl_client_auth="required",
                                     ssl_principal_mapping_rules="RULE:^CN=bob$/bob/"))
    with tls_connect(broker, client_context(certs, cert=certs.alice)) as sock:
        assert not api_versions_ok(sock)
    wait_until(lambda: failures(caplog), "the log line")
    assert "No rules apply to CN=alice,OU=eng,O=seglog,C=NO" in failures(caplog)[0]


# --- failures: a clear client error, one log line, others served ------------------------------


@pytest.mark.parametrize("client", ["no certificate", "expired", "foreign"])
def test_required_client_auth_refuses(certs, start_broker, caplog, client):
    caplog.set_level(logging.INFO, logger="seglog.server")
    broker = start_broker(ssl_config(certs, ssl_client_auth="required"))
    cert = {"no certificate": None, "expired": certs.expired, "foreign": certs.foreign}[client]
    refused = False
    try:
        with tls_connect(broker, client_context(certs, cert=cert)) as sock:
            # TLS 1.3: the client's handshake ends before the server checked its
            # certificate; the refusal (an alert) comes with the first read.
            refused = not api_versions_ok(sock)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as exc:
        refused = True
        assert "certificate" in str(exc).lower() or "alert" in str(exc).lower(), exc
    assert refused
    wait_until(lambda: failures(caplog), "the broker's log line")
    assert len(failures(caplog)) == 1, failures(caplog)
    assert "SSL handshake failed" in failures(caplog)[0]
    with tls_connect(broker, client_context(certs, cert=certs.alice)) as good:
        assert api_versions_ok(good)  # other clients are served


def test_untrusted_broker_certificate(certs, start_broker, caplog):
    caplog.set_level(logging.INFO, logger="seglog.server")
    broker = start_broker(ssl_config(certs))
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        tls_connect(broker, client_context(certs, ca=certs.foreign_ca))
    wait_until(lambda: failures(caplog), "the broker's log line")
    assert len(failures(caplog)) == 1 and "SSL handshake failed" in failures(caplog)[0]
    assert served_over_tls(broker, certs)


def test_plaintext_kafka_on_the_tls_port(certs, start_broker, caplog):
    caplog.set_level(logging.INFO, logger="seglog.server")
    broker = start_broker(ssl_config(certs))
    with socket.create_connection(broker.listener_address("SSL"), timeout=WAIT_S) as sock:
        sock.settimeout(WAIT_S)
        sock.sendall(request_frame(API_VERSIONS, 0, 1))
        assert read_frame(sock) is None  # closed, no answer
    wait_until(lambda: failures(caplog), "the broker's log line")
    (line,) = failures(caplog)
    assert "SSL handshake failed" in line and "WRONG_VERSION_NUMBER" in line.upper(), line
    assert served_over_tls(broker, certs)


def test_tls_on_the_plaintext_port(certs, start_broker, caplog):
    caplog.set_level(logging.INFO, logger="seglog.server")
    broker = start_broker(ssl_config(certs))
    raw = socket.create_connection(broker.listener_address("PLAINTEXT"), timeout=WAIT_S)
    with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
        client_context(certs).wrap_socket(raw, server_hostname="127.0.0.1")
    raw.close()
    wait_until(lambda: any("closing" in r.getMessage() for r in caplog.records
                           if r.name == "seglog.server"), "the broker's log line")
    with socket.create_connection(broker.listener_address("PLAINTEXT"), timeout=WAIT_S) as ok:
        ok.settimeout(WAIT_S)
        assert api_versions_ok(ok)


def test_a_handshake_that_never_comes_is_closed(certs, start_broker, caplog):
    caplog.set_level(logging.INFO, logger="seglog.server")
    broker = start_broker(ssl_config(certs))
    broker.server.ssl_handshake_timeout_s = 0.5
    with socket.create_connection(broker.listener_address("SSL"), timeout=WAIT_S) as silent:
        silent.settimeout(WAIT_S)
        assert served_over_tls(broker, certs)  # served while the silent one waits
        assert silent.recv(1) == b""  # closed by the broker after its handshake timeout
    wait_until(lambda: failures(caplog), "the broker's log line")
    (line,) = failures(caplog)
    assert "no handshake within 0.5 s" in line
    # Nothing held: the task lets go from its done callback, a loop turn after it logged.
    wait_until(lambda: not broker.server._handshakes, "the handshake task let go")


# --- a slow reader over TLS -------------------------------------------------------------------


def _fetch_v4(max_bytes: int) -> bytes:
    name = TOPIC.encode()
    return (struct.pack(">iiiib", -1, 0, 1, max_bytes, 0) + struct.pack(">ih", 1, len(name))
            + name + struct.pack(">iiqi", 1, 0, 0, max_bytes))


def test_a_slow_reader_over_tls_is_bounded(certs, start_broker):
    # A TLS client that pipelines fetches of an 8 MiB log and does not read: what the TLS
    # layer and the socket transport under it hold stays about one write chunk (the record
    # sets are encrypted a chunk at a time, as the connection hands them over), the rest
    # waits as views of the segment, and the connection stops reading.
    broker = start_broker(ssl_config(certs, socket_send_buffer_bytes="65536"))
    broker.store.create_topic(TOPIC, partitions=1)
    log = broker.store.topic(TOPIC).log(0)
    value = b"v" * 1000
    while log.end_offset < 8 * 1024:
        log.append_batch([value] * 1024)
    fetches = 6
    context = client_context(certs)
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    raw.settimeout(WAIT_S)
    raw.connect(broker.listener_address("SSL"))
    sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
    try:
        sock.sendall(b"".join(request_frame(FETCH, 4, i, _fetch_v4(2**31 - 1))
                              for i in range(fetches)))
        time.sleep(0.5)

        async def look():
            for _ in range(20):
                await asyncio.sleep(0.01)
            (connection,) = broker.server.connections.values()
            transport = connection.transport
            # The socket transport under the TLS one (asyncio names it privately only).
            tcp = transport._ssl_protocol._transport
            return (connection.unsent_response_bytes, transport.get_write_buffer_size(),
                    tcp.get_write_buffer_size(), connection.held_copied_response_bytes,
                    transport.is_reading())

        unsent, in_tls, in_socket_transport, copied, reading = run_on_broker_loop(broker, look())
        chunk = connection_module.RESPONSE_WRITE_CHUNK_BYTES
        assert unsent > 6 * MIB
        assert in_tls + in_socket_transport <= 2 * chunk + 64 * 1024
        assert copied < 64 * 1024
        assert not reading
        for i in range(fetches):
            frame = read_frame(sock)
            assert frame is not None and struct.unpack_from(">i", frame)[0] == i
            assert len(frame) > 7 * MIB
    finally:
        sock.close()


def test_large_requests_over_tls_are_read_whole(certs, start_broker):
    # Large requests through the TLS layer's reads (many TLS records each, the large-frame
    # path filled over several reads): a 330 KB Produce sent in pieces and another in one
    # write are each stored once, in order, and small requests before, between and after
    # them are answered.
    from produce_helpers import produce_v9_answer, produce_v9_frame

    broker = start_broker(ssl_config(certs))
    broker.store.create_topic(TOPIC, partitions=1)
    batches = [[f"{request}-{index:05d}".encode().ljust(100, b"v") for index in range(3000)]
               for request in range(2)]
    frames = [produce_v9_frame(10 + request, TOPIC, values)
              for request, values in enumerate(batches)]
    with tls_connect(broker, client_context(certs)) as sock:
        assert api_versions_ok(sock, 1)
        first = frames[0]
        for start in range(0, len(first), 50_000):
            sock.sendall(first[start:start + 50_000])
            time.sleep(0.01)
        sock.sendall(frames[1] + request_frame(API_VERSIONS, 0, 2))
        for request in range(2):
            answer = read_frame(sock)
            assert answer is not None
            assert produce_v9_answer(answer, TOPIC) == (10 + request, 0, 3000 * request)
        versions = read_frame(sock)
        assert versions is not None and struct.unpack_from(">ih", versions) == (2, 0)
    log = broker.store.topic(TOPIC).log(0)
    assert [record.value for record in log.records()] == batches[0] + batches[1]


def test_handshakes_in_progress_count_toward_max_connections(certs, start_broker, caplog):
    caplog.set_level(logging.INFO, logger="seglog.server")
    broker = start_broker(ssl_config(certs, max_connections="2"))
    silent = [socket.create_connection(broker.listener_address("SSL"), timeout=WAIT_S)
              for _ in range(2)]
    try:
        wait_until(lambda: len(broker.server._handshakes) == 2, "two handshakes pending")
        with socket.create_connection(broker.listener_address("SSL"), timeout=WAIT_S) as third:
            third.settimeout(WAIT_S)
            try:
                assert third.recv(1) == b""  # refused: closed at once
            except ConnectionResetError:
                pass
        assert any("max.connections=2 reached" in r.getMessage() for r in caplog.records)
    finally:
        for sock in silent:
            sock.close()
