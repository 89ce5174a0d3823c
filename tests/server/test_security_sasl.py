"""SASL on a SASL_PLAINTEXT listener (issue 23): PLAIN and SCRAM-SHA-256/512 logins with
every client (confluent-kafka, kafka-python, aiokafka, kcat; Kafka's Java console tools in
test_security_sasl_java.py), the failures (wrong password, unknown user, wrong mechanism, a
client without SASL, a request before authentication), re-authentication (KIP-368), the
settings refused at start, the credential file, and a loop of bad logins."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import shutil
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from seglog.errors import CorruptCredentialsError, InvalidConfigError
from seglog.server.broker import Broker
from seglog.server.sasl.credentials import CREDENTIALS_FILE

from conftest import TEST_BROKER_CONFIG
from sasl_helpers import ALL_MECHANISMS, RawClient, sasl_broker_config, scram_upsertion

pytestmark = pytest.mark.clients

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
WAIT_S = 30
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
         "SCRAM-SHA-512": ("carol", "carol-secret")}
INVALID_PLAIN = "Authentication failed: Invalid username or password"


def _conf(broker, mechanism, user, password, **extra):
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            **extra}


@pytest.fixture
def sasl_broker(broker_factory, tmp_path):
    """A broker with a SASL_PLAINTEXT listener, PLAIN users admin and alice, and SCRAM users
    bob (SHA-256) and carol (SHA-512) made through AlterUserScramCredentials."""
    broker = broker_factory(config=sasl_broker_config(), data_dir=tmp_path / "data")
    admin = AdminClient(_conf(broker, "PLAIN", "admin", "admin-secret"))
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                4096), b"bob-secret"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                  8192), b"carol-secret")])
    for future in futures.values():
        future.result(WAIT_S)
    return broker


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_confluent_kafka_produces_and_consumes(sasl_broker, mechanism):
    user, password = USERS[mechanism]
    sasl_broker.store.create_topic("t", partitions=1)
    producer = Producer(_conf(sasl_broker, mechanism, user, password))
    for i in range(5):
        producer.produce("t", b"v%d" % i)
    assert producer.flush(WAIT_S) == 0
    consumer = Consumer(_conf(sasl_broker, mechanism, user, password, **{
        "group.id": f"g-{mechanism}", "auto.offset.reset": "earliest"}))
    consumer.subscribe(["t"])
    got = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == [b"v%d" % i for i in range(5)]


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_kafka_python_produces_and_consumes(sasl_broker, mechanism):
    import kafka

    user, password = USERS[mechanism]
    sasl_broker.store.create_topic("kp", partitions=1)
    common = dict(bootstrap_servers=sasl_broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism=mechanism, sasl_plain_username=user,
                  sasl_plain_password=password)
    producer = kafka.KafkaProducer(**common)
    producer.send("kp", b"hello").get(WAIT_S)
    producer.close()
    consumer = kafka.KafkaConsumer("kp", auto_offset_reset="earliest",
                                   consumer_timeout_ms=10000, **common)
    got = [m.value for m in consumer][:1]
    consumer.close()
    assert got == [b"hello"]


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_aiokafka_produces_and_consumes(sasl_broker, mechanism):
    import aiokafka

    user, password = USERS[mechanism]
    sasl_broker.store.create_topic("ak", partitions=1)
    common = dict(bootstrap_servers=sasl_broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism=mechanism, sasl_plain_username=user,
                  sasl_plain_password=password)

    async def run():
        producer = aiokafka.AIOKafkaProducer(**common)
        await producer.start()
        try:
            await producer.send_and_wait("ak", b"aio")
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer("ak", auto_offset_reset="earliest", **common)
        await consumer.start()
        try:
            message = await asyncio.wait_for(consumer.getone(), WAIT_S)
        finally:
            await consumer.stop()
        return message.value

    assert asyncio.run(run()) == b"aio"


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_kcat_produces_and_consumes(sasl_broker, mechanism):
    if not shutil.which(KCAT):
        pytest.skip("kcat is not installed")
    user, password = USERS[mechanism]
    sasl_broker.store.create_topic("kc", partitions=1)
    auth = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={mechanism}",
            "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    done = subprocess.run([KCAT, "-b", sasl_broker.bootstrap, *auth, "-P", "-t", "kc"],
                          input=b"one\ntwo\n", capture_output=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([KCAT, "-b", sasl_broker.bootstrap, *auth, "-C", "-t", "kc", "-e",
                           "-f", "%s\n"], capture_output=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == ["one", "two"]


# --- failures ------------------------------------------------------------------------------


def _auth_error(broker, mechanism, user, password):
    """The error a confluent-kafka producer reports for a login (None when it got in)."""
    errors = []
    producer = Producer(_conf(broker, mechanism, user, password,
                              error_cb=errors.append, **{"message.timeout.ms": 3000}))
    producer.produce("never", b"x")
    producer.flush(5)
    return next((e for e in errors if "authentication" in e.str().lower()), None)


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_wrong_password_and_unknown_user_fail_alike(sasl_broker, mechanism, caplog):
    user, _ = USERS[mechanism]
    caplog.set_level(logging.INFO, logger="seglog.server")
    wrong = _auth_error(sasl_broker, mechanism, user, "not-the-password")
    unknown = _auth_error(sasl_broker, mechanism, "mallory", "whatever")
    assert wrong is not None and unknown is not None
    expected = (INVALID_PLAIN if mechanism == "PLAIN" else
                f"Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {mechanism}")
    assert expected in wrong.str() and expected in unknown.str()
    failures = [r for r in caplog.records if "Failed authentication" in r.getMessage()]
    assert failures and all(r.levelno == logging.INFO for r in failures)
    # Nothing was written or created by the refused clients, and a good client is served.
    assert "never" not in sasl_broker.store.topics()
    good_user, good_password = USERS[mechanism]
    assert _auth_error(sasl_broker, mechanism, good_user, good_password) is None


def test_raw_failures_are_answered_after_the_delay_then_closed(sasl_broker):
    client = RawClient(sasl_broker.bootstrap)
    started = time.monotonic()
    [answer] = client.login("PLAIN", "alice", "wrong")
    elapsed_s = time.monotonic() - started
    assert answer.error_code == 58 and answer.error_message == INVALID_PLAIN
    assert elapsed_s >= 0.09  # connection.failed.authentication.delay.ms=100 (a lower bound)
    assert client.is_closed()
    client = RawClient(sasl_broker.bootstrap)
    [first] = client.login("SCRAM-SHA-256", "nobody", "x")
    assert first.error_code == 58
    assert first.error_message == ("Authentication failed during authentication due to "
                                   "invalid credentials with SASL mechanism SCRAM-SHA-256")
    assert client.is_closed()


def test_unsupported_mechanism_is_answered_with_the_enabled_ones(sasl_broker):
    client = RawClient(sasl_broker.bootstrap)
    answer = client.handshake("GSSAPI")
    assert answer.error_code == 33
    assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]  # Kafka's
    assert client.is_closed()
    assert _auth_error(sasl_broker, "PLAIN", "alice", "alice-secret") is None


def test_a_client_without_sasl_is_refused_and_served_nothing(sasl_broker, caplog):
    caplog.set_level(logging.INFO, logger="seglog.server")
    sasl_broker.store.create_topic("quiet", partitions=1)
    errors = []
    producer = Producer({"bootstrap.servers": sasl_broker.bootstrap, "error_cb": errors.append,
                         "message.timeout.ms": 2000})
    producer.produce("quiet", b"x")
    producer.flush(4)
    assert errors  # the client sees its connection closed
    assert sasl_broker.store.topic("quiet").log(0).end_offset == 0
    assert any("Unexpected Kafka request of type" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("api_key,version,fields", [
    (3, 1, {"topics": None}),  # Metadata
    (36, 2, {"auth_bytes": b"\x00alice\x00alice-secret"}),  # SaslAuthenticate before handshake
])
def test_a_request_before_authentication_closes_the_connection(sasl_broker, api_key, version,
                                                                fields):
    client = RawClient(sasl_broker.bootstrap)
    assert client.call(18, 3, client_software_name="t", client_software_version="1") is not None
    assert client.call(api_key, version, **fields) is None  # closed, unanswered
    client = RawClient(sasl_broker.bootstrap)
    assert client.handshake("PLAIN").error_code == 0
    assert client.call(3, 1, topics=None) is None  # Kafka: only SaslAuthenticate now


def test_sasl_server_max_receive_size_bounds_a_frame_before_authentication(broker_factory,
                                                                           tmp_path):
    broker = broker_factory(config=sasl_broker_config(**{
        "sasl.server.max.receive.size": "1024"}), data_dir=tmp_path / "d")
    client = RawClient(broker.bootstrap)
    assert client.handshake("PLAIN").error_code == 0
    assert client.authenticate(b"\x00alice\x00" + b"p" * 2000) is None
    client = RawClient(broker.bootstrap)
    assert client.login("PLAIN", "alice", "alice-secret")[-1].error_code == 0
    # Once authenticated, socket.request.max.bytes applies again.
    metadata = client.m(3, 1)
    assert client.call(3, 1, topics=(metadata.MetadataRequestTopic(name="x" * 1500),)) \
        is not None


def test_second_handshake_and_authenticate_after_login_answer_illegal_sasl_state(sasl_broker):
    client = RawClient(sasl_broker.bootstrap)
    assert client.login("PLAIN", "alice", "alice-secret")[-1].error_code == 0
    assert client.authenticate(b"x").error_code == 34
    assert client.handshake("PLAIN").error_code == 34  # no session lifetime: no re-auth
    assert client.call(3, 1, topics=None) is not None


# --- re-authentication (KIP-368) -----------------------------------------------------------


def test_reauthentication(broker_factory, tmp_path):
    broker = broker_factory(config=sasl_broker_config(**{
        "connections.max.reauth.ms": "1500"}), data_dir=tmp_path / "d")
    client = RawClient(broker.bootstrap)
    [done] = client.login("PLAIN", "alice", "alice-secret")
    assert done.error_code == 0 and done.session_lifetime.total_seconds() == 1.5
    [v0] = RawClient(broker.bootstrap).login("PLAIN", "alice", "alice-secret", version=0)
    assert v0.error_code == 0
    # Within the first second a SaslHandshake is not a re-authentication (Kafka).
    assert client.handshake("PLAIN").error_code == 34
    time.sleep(1.1)
    [again] = client.login("PLAIN", "alice", "alice-secret")
    assert again.error_code == 0 and again.session_lifetime.total_seconds() == 1.5
    assert client.call(3, 1, topics=None) is not None
    time.sleep(1.1)
    [other] = client.login("PLAIN", "admin", "admin-secret")
    assert other.error_code == 58
    assert other.error_message == ("Cannot change principals during re-authentication from "
                                   "User.alice: User.admin")
    assert client.is_closed()
    # A session that expires unrenewed: its next request closes the connection.
    late = RawClient(broker.bootstrap)
    assert late.login("PLAIN", "alice", "alice-secret")[-1].error_code == 0
    time.sleep(1.7)
    assert late.call(3, 1, topics=None) is None


def test_confluent_kafka_reauthenticates_and_keeps_working(broker_factory, tmp_path):
    broker = broker_factory(config=sasl_broker_config(**{
        "connections.max.reauth.ms": "1000"}), data_dir=tmp_path / "d")
    broker.store.create_topic("r", partitions=1)
    producer = Producer(_conf(broker, "PLAIN", "alice", "alice-secret"))
    for i in range(6):
        producer.produce("r", b"%d" % i)
        assert producer.flush(WAIT_S) == 0
        time.sleep(0.5)
    assert broker.store.topic("r").log(0).end_offset == 6


# --- settings refused at start --------------------------------------------------------------


@pytest.mark.parametrize("change,needle", [
    ({"sasl.enabled.mechanisms": None}, "GSSAPI (Kafka's default)"),
    ({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"}, "OAUTHBEARER"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": None},
     "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="x"'},
     "not terminated by semi-colon"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule bogus;'},
     "Invalid login module control flag 'bogus'"),
    ({"listener.name.sasl_plaintext.plain.sasl.jaas.config":
      'a.B required; c.D required;'}, "contains 2 login modules, should be 1 module"),
    ({"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
      'org.apache.kafka.common.security.plain.PlainLoginModule required;'},
     "is not org.apache.kafka.common.security.scram.ScramLoginModule"),
])
def test_settings_refused_at_start(tmp_path, change, needle):
    config = {**TEST_BROKER_CONFIG, **sasl_broker_config()}
    for name, value in change.items():
        if value is None:
            config.pop(name)
        else:
            config[name] = value
    with pytest.raises(InvalidConfigError, match=None) as caught:
        Broker(tmp_path / "d", listen=("127.0.0.1", 0), config=config)
    assert needle in str(caught.value)


# --- credentials ---------------------------------------------------------------------------


def test_credentials_persist_and_a_corrupt_file_stops_the_start(broker_factory, tmp_path):
    data = tmp_path / "data"
    broker = broker_factory(config=sasl_broker_config(), data_dir=data)
    admin = AdminClient(_conf(broker, "PLAIN", "admin", "admin-secret"))
    [future] = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"dave-pw")]).values()
    future.result(WAIT_S)
    broker.stop()
    stored = json.loads((data / CREDENTIALS_FILE).read_text())
    assert set(stored["users"]["dave"]) == {"SCRAM-SHA-512"}
    assert "dave-pw" not in (data / CREDENTIALS_FILE).read_text()
    again = broker_factory(config=sasl_broker_config(), data_dir=data)
    assert _auth_error(again, "SCRAM-SHA-512", "dave", "dave-pw") is None
    admin = AdminClient(_conf(again, "SCRAM-SHA-512", "dave", "dave-pw"))
    [future] = admin.alter_user_scram_credentials([UserScramCredentialDeletion(
        "dave", ScramMechanism.SCRAM_SHA_512)]).values()
    future.result(WAIT_S)
    assert _auth_error(again, "SCRAM-SHA-512", "dave", "dave-pw") is not None
    again.stop()
    (data / CREDENTIALS_FILE).write_text('{"version": 1, "users": {"x": {"SCRAM-SHA-256": '
                                         '"salt=!!,iterations=1"}}}')
    with pytest.raises(CorruptCredentialsError, match="scram-credentials.json"):
        broker_factory(config=sasl_broker_config(), data_dir=data)


def test_credential_api_errors(sasl_broker):
    client = RawClient(sasl_broker.bootstrap)
    assert client.login("PLAIN", "admin", "admin-secret")[-1].error_code == 0
    m = client.m(51, 0)
    answer = client.call(51, 0, deletions=(
        m.ScramCredentialDeletion(name="nobody", mechanism=1),
        m.ScramCredentialDeletion(name="bob", mechanism=1),
    ), upsertions=(
        scram_upsertion(m, "bob", 1, "pw"),
        scram_upsertion(m, "", 1, "pw"),
        scram_upsertion(m, "weird", 3, "pw"),
        scram_upsertion(m, "few", 1, "pw", iterations=100),
        scram_upsertion(m, "many", 2, "pw", iterations=16385),
        scram_upsertion(m, "fine", 2, "pw", iterations=16384),
    ))
    got = {r.user: (r.error_code, r.error_message) for r in answer.results}
    assert got == {
        "nobody": (91, "Attempt to delete a user credential that does not exist"),
        "bob": (92, "A user credential cannot be altered twice in the same request"),
        "": (93, "Username must not be empty"),
        "weird": (33, "Unknown SCRAM mechanism"),
        "few": (93, "Too few iterations"),
        "many": (93, "Too many iterations"),
        "fine": (0, None),
    }
    d = client.m(50, 0)
    answer = client.call(50, 0, users=(d.UserName(name="fine"), d.UserName(name="bob"),
                                       d.UserName(name="bob"), d.UserName(name="zed")))
    got = {r.user: (r.error_code, r.error_message,
                    [(i.mechanism, i.iterations) for i in r.credential_infos])
           for r in answer.results}
    assert got == {
        "fine": (0, "", [(2, 16384)]),
        "bob": (92, "Cannot describe SCRAM credentials for the same user twice in a single "
                    "request: bob", []),
        "zed": (91, "Attempt to describe a user credential that does not exist: zed", []),
    }
    answer = client.call(50, 0, users=None)
    assert [r.user for r in answer.results] == ["bob", "carol", "fine"]


# --- a loop of bad logins ------------------------------------------------------------------


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_a_loop_of_bad_logins_stays_bounded(broker_factory, tmp_path):
    """Many bad logins, one after another and some left open: the broker's connections,
    memory and CPU stay bounded (measured and reported; the bounds are generous: behaviour,
    not speed) and a good client is served throughout."""
    broker = broker_factory(config=sasl_broker_config(**{
        "connection.failed.authentication.delay.ms": "20"}), data_dir=tmp_path / "d")
    pid = os.getpid()
    for _ in range(20):  # warm up: imports, first allocations
        RawClient(broker.bootstrap).login("PLAIN", "alice", "bad")
    rss_before_kib = _rss_kib(pid)
    cpu_before_s = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    held = []
    for i in range(300):
        client = RawClient(broker.bootstrap)
        mechanism = ALL_MECHANISMS[i % 3]
        result = client.login(mechanism, "alice" if i % 2 else "nobody", "bad")
        assert result[-1] is not None and result[-1].error_code in (58,)
        if i % 30 == 0:
            held.append(client)  # never read, never closed by the client
        else:
            client.close()
    assert _auth_error(broker, "PLAIN", "alice", "alice-secret") is None
    rss_growth_kib = _rss_kib(pid) - rss_before_kib
    cpu_s = resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu_before_s
    print(f"300 bad logins: RSS growth {rss_growth_kib} KiB, CPU {cpu_s:.2f} s (this process)")
    deadline = time.monotonic() + 10
    while len(broker.server.connections) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(broker.server.connections) <= 1  # the broker closed every failed one
    assert rss_growth_kib < 64 * 1024
    for client in held:
        client.close()


def test_plaintext_listener_still_answers_illegal_sasl_state(broker):
    client = RawClient(broker.bootstrap)
    answer = client.handshake("PLAIN")
    assert answer.error_code == 34 and list(answer.mechanisms) == []
    answer = client.authenticate(b"\x00a\x00b")
    assert answer.error_code == 34
    assert answer.error_message == ("SaslAuthenticate request received after successful "
                                    "authentication")

