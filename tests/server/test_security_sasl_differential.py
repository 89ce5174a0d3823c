"""Differential: the same SASL logins and SCRAM credential requests, byte for byte (kio over a
socket), to the real Kafka 4.4 broker (a SASL_PLAINTEXT listener beside its PLAINTEXT one)
and to seglog serve, and the same answers back: good logins, a wrong password, an unknown
user, an unsupported mechanism, a request before authentication, and the answers of
AlterUserScramCredentials / DescribeUserScramCredentials (KRaft Kafka stores SCRAM
credentials through the same API), and the delegation token APIs' answers (both with
``delegation.token.secret.key``).

One known difference: a request other than SaslAuthenticate after SaslHandshake is answered by
Kafka with that request's error response, then the connection closes; seglog closes without
the answer (both close, and the client learns nothing)."""

from __future__ import annotations

import os

import pytest

from seglog.bench.kafka import KafkaBroker, find_kafka, free_port

from kafka_waits import eventually
from sasl_helpers import RawClient, sasl_broker_config, sasl_properties, scram_upsertion

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_REF, _WHY = find_kafka()
TOKEN_SECRET = {"delegation.token.secret.key": "differential-secret"}


@pytest.fixture(scope="module")
def real_kafka(tmp_path_factory):
    """``(plaintext bootstrap, sasl bootstrap)`` of a real Kafka 4.4 broker."""
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    sasl_port = free_port()
    kafka = KafkaBroker(_REF, tmp_path_factory.mktemp("kafka"))
    extra = {
        "listeners": (f"PLAINTEXT://127.0.0.1:{kafka.port},"
                      f"CONTROLLER://127.0.0.1:{kafka.controller_port},"
                      f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"),
        "advertised.listeners": (f"PLAINTEXT://127.0.0.1:{kafka.port},"
                                 f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}"),
        "listener.security.protocol.map": ("CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                           "SASL_PLAINTEXT:SASL_PLAINTEXT"),
        **sasl_properties(), **TOKEN_SECRET}
    with open(kafka.properties_path, "a", encoding="utf-8") as properties:
        properties.writelines(f"{key}={value}\n" for key, value in extra.items())
    kafka.format()
    kafka.start()
    try:
        yield kafka.bootstrap, f"127.0.0.1:{sasl_port}"
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def seglog_broker(tmp_path_factory):
    from seglog.server.broker import Broker

    broker = Broker(tmp_path_factory.mktemp("seglog"), listen=("127.0.0.1", 0),
                    config=sasl_broker_config(**TOKEN_SECRET))
    broker.start()
    try:
        yield broker.bootstrap, broker.bootstrap
    finally:
        broker.stop()


def _admin(plain_bootstrap, sasl_bootstrap, same):
    """A connection that may send the credential APIs: Kafka's PLAINTEXT listener, or seglog's
    SASL listener after a PLAIN login as admin."""
    if not same:
        return RawClient(plain_bootstrap)
    client = RawClient(sasl_bootstrap)
    assert client.login("PLAIN", "admin", "admin-secret")[-1].error_code == 0
    return client


def _story(plain_bootstrap, sasl_bootstrap):
    """Everything the test compares, as plain values."""
    out = {}
    admin = _admin(plain_bootstrap, sasl_bootstrap, plain_bootstrap == sasl_bootstrap)
    m = admin.m(51, 0)
    alter = admin.call(51, 0, deletions=(
        m.ScramCredentialDeletion(name="nobody", mechanism=1),
        m.ScramCredentialDeletion(name="weird", mechanism=0),
    ), upsertions=(
        scram_upsertion(m, "bob", 1, "bob-secret"),
        scram_upsertion(m, "bob", 2, "bob-512"),
        scram_upsertion(m, "carol", 2, "carol-secret", iterations=8192),
        scram_upsertion(m, "", 1, "pw"),
        scram_upsertion(m, "few", 1, "pw", iterations=4095),
        scram_upsertion(m, "many", 1, "pw", iterations=16385),
    ))
    out["alter"] = sorted((r.user, int(r.error_code), r.error_message) for r in alter.results)
    d = admin.m(50, 0)

    def describe():
        r = admin.call(50, 0, users=(d.UserName(name="carol"), d.UserName(name="zed"),
                                     d.UserName(name="zed"), d.UserName(name="nobody")))
        return sorted((x.user, int(x.error_code), x.error_message,
                       sorted((int(i.mechanism), int(i.iterations)) for i in x.credential_infos))
                      for x in r.results)

    # Kafka (KRaft) answers the alter once its controller committed the records; the broker's
    # image (which describes them and checks SCRAM logins) applies them a moment later.
    # Describe again, bounded, until carol's credential shows: on both brokers alike.
    out["describe"] = eventually(describe, lambda rows: any(
        (user, code, infos) == ("carol", 0, [(2, 8192)]) for user, code, _, infos in rows))
    logins = {}
    for name, (mechanism, user, password) in {
        "plain-good": ("PLAIN", "alice", "alice-secret"),
        "plain-wrong": ("PLAIN", "alice", "nope"),
        "plain-unknown": ("PLAIN", "mallory", "x"),
        "plain-empty-password": ("PLAIN", "alice", ""),
        "scram512-good": ("SCRAM-SHA-512", "carol", "carol-secret"),
        "scram512-wrong": ("SCRAM-SHA-512", "carol", "nope"),
        "scram256-unknown": ("SCRAM-SHA-256", "mallory", "x"),
        "scram256-other-mechanism": ("SCRAM-SHA-256", "carol", "carol-secret"),
        "gssapi": ("GSSAPI", "a", "b"),
        "oauthbearer": ("OAUTHBEARER", "a", "b"),
    }.items():
        client = RawClient(sasl_bootstrap)
        answers = client.login(mechanism, user, password)
        last = answers[-1]
        logins[name] = (
            None if last is None else int(last.error_code),
            None if last is None else getattr(last, "error_message", None),
            list(getattr(last, "mechanisms", ())) if last is not None else None,
            client.is_closed() if last is None or last.error_code != 0 else "open")
        client.close()
    out["logins"] = logins
    client = RawClient(sasl_bootstrap)
    out["metadata-before-auth"] = client.call(3, 1, topics=None)
    client = RawClient(sasl_bootstrap)
    handshake = client.handshake("PLAIN")
    # Kafka answers this one with the request's error response (an empty Metadata) before it
    # closes; seglog closes without it (a known difference: it cannot build every API's
    # error response before authentication). Both close.
    client.call(3, 1, topics=None)
    out["metadata-after-handshake"] = (int(handshake.error_code), client.is_closed())
    client = RawClient(sasl_bootstrap)
    client.login("PLAIN", "alice", "alice-secret")
    again = client.authenticate(b"x")
    out["authenticate-after-login"] = (int(again.error_code), again.error_message)
    out["handshake-after-login"] = int(client.handshake("PLAIN").error_code)
    return out


def _token_story(plain_bootstrap, sasl_bootstrap):
    """Delegation token requests' error codes (and what a token login yields)."""
    import base64
    import datetime

    from seglog.sasl.scram import MECHANISMS, ScramClient

    out = {}
    period = datetime.timedelta(milliseconds=-1)
    if plain_bootstrap != sasl_bootstrap:  # Kafka's PLAINTEXT listener: not allowed there
        plain = RawClient(plain_bootstrap)
        out["create-plaintext"] = plain.error_code(38, 3, owner_principal_type=None,
                                                   owner_principal_name=None, renewers=(),
                                                   max_lifetime=period)
    else:
        out["create-plaintext"] = 64  # seglog's PLAINTEXT listeners: tested elsewhere
    alice = RawClient(sasl_bootstrap)
    assert alice.login("PLAIN", "alice", "alice-secret")[-1].error_code == 0
    m = alice.m(38, 3)
    out["create-bad-renewer"] = alice.error_code(
        38, 3, owner_principal_type=None, owner_principal_name=None,
        renewers=(m.CreatableRenewers(principal_type="Group", principal_name="g"),),
        max_lifetime=period)
    created = alice.call(38, 3, owner_principal_type=None, owner_principal_name=None,
                         renewers=(m.CreatableRenewers(principal_type="User",
                                                       principal_name="admin"),),
                         max_lifetime=datetime.timedelta(hours=2))
    out["create"] = (int(created.error_code), created.principal_name,
                     created.token_requester_principal_name,
                     (created.max_timestamp - created.issue_timestamp).total_seconds(),
                     (created.expiry_timestamp - created.issue_timestamp).total_seconds(),
                     len(created.hmac))
    # The broker's image (which describes tokens and checks token logins) applies the
    # controller's record a moment after the answer: describe again, bounded, until it shows.
    described = eventually(lambda: alice.call(41, 3, owners=None),
                           lambda r: created.token_id in {t.token_id for t in r.tokens})
    out["describe"] = [(t.principal_name, [r.principal_name for r in t.renewers])
                       for t in described.tokens]
    out["describe-empty-owners"] = len(alice.call(41, 3, owners=()).tokens)
    out["renew-unknown"] = alice.error_code(39, 2, hmac=b"nope",
                                            renew_period=datetime.timedelta(minutes=1))
    client = RawClient(sasl_bootstrap)
    client.handshake("SCRAM-SHA-256")
    scram = ScramClient(MECHANISMS["SCRAM-SHA-256"], created.token_id,
                        base64.b64encode(created.hmac).decode(), extensions={"tokenauth": "true"})
    first = client.authenticate(scram.first())
    final = client.authenticate(scram.final(first.auth_bytes))
    out["token-login"] = int(final.error_code)
    out["create-as-token"] = client.error_code(38, 3, owner_principal_type=None,
                                               owner_principal_name=None, renewers=(),
                                               max_lifetime=period)
    bob = RawClient(sasl_bootstrap)
    assert bob.login("SCRAM-SHA-512", "carol", "carol-secret")[-1].error_code == 0
    out["renew-not-owner"] = bob.error_code(39, 2, hmac=created.hmac,
                                            renew_period=datetime.timedelta(minutes=1))
    out["expire-now"] = alice.error_code(40, 2, hmac=created.hmac, expiry_time_period=period)
    # Expiring at once removes the token: wait (bounded) until the describe no longer lists it.
    eventually(lambda: alice.call(41, 3, owners=None),
               lambda r: created.token_id not in {t.token_id for t in r.tokens})
    out["renew-after-expire"] = alice.error_code(39, 2, hmac=created.hmac,
                                                 renew_period=datetime.timedelta(minutes=1))
    return out


def test_same_answers_as_kafka(real_kafka, seglog_broker):
    expected = _story(*real_kafka)
    got = _story(*seglog_broker)
    for key in expected:
        if key == "logins":
            for login in expected[key]:
                assert got[key][login] == expected[key][login], login
        assert got[key] == expected[key], key


def test_same_token_answers_as_kafka(real_kafka, seglog_broker):
    # After test_same_answers_as_kafka: carol has SCRAM-SHA-512 credentials on both.
    assert _token_story(*seglog_broker) == _token_story(*real_kafka)
