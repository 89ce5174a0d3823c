"""The SASL pieces on their own: Kafka's JAAS syntax, SCRAM against RFC 7677's worked
example, Kafka's credential string form, PLAIN's token rules, and the order Kafka lists a
listener's mechanisms in."""

from __future__ import annotations

import base64

import pytest

from seglog.errors import InvalidConfigError, SaslAuthenticationError
from seglog.sasl import scram
from seglog.sasl.jaas import parse_jaas_config, single_login_module
from seglog.sasl.plain import PlainServer
from seglog.server.sasl.settings import java_hash_map_order


def test_jaas_syntax():
    [module] = parse_jaas_config(
        '/* a comment */ org.apache.kafka.common.security.plain.PlainLoginModule REQUIRED\n'
        '  username="admin" password="a\\"b c" // trailing comment\n'
        "  user_alice='x;y' user_bob=plainword;")
    assert module.flag == "required"
    assert module.username == "admin" and module.password == 'a"b c'
    assert module.plain_users() == {"alice": "x;y", "bob": "plainword"}
    assert len(parse_jaas_config("a.B optional; c.D sufficient k=v;")) == 2
    for text, message in [("a.B required k=v", "not terminated by semi-colon"),
                          ("a.B required k;", "is not name=value"),
                          ('a.B required k="open;', "unterminated quoted string"),
                          ("a.B", "control flag not specified")]:
        with pytest.raises(InvalidConfigError, match=message):
            parse_jaas_config(text)
    with pytest.raises(InvalidConfigError, match="contains 0 login modules"):
        single_login_module("", config_name="x")


def test_scram_sha_256_rfc7677_example(monkeypatch):
    mechanism = scram.MECHANISMS["SCRAM-SHA-256"]
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = scram.credential_from_password(mechanism, "pencil", 4096, salt=salt)
    monkeypatch.setattr(scram, "_random_string", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server = scram.ScramServer(mechanism, lambda user, m: credential if user == "user" else None)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"
    # Kafka's string form round-trips.
    assert scram.ScramCredential.from_kafka(credential.to_kafka()) == credential
    with pytest.raises(ValueError):
        scram.ScramCredential.from_kafka("salt=abc,iterations=4096")


def test_scram_failures_hide_their_detail():
    mechanism = scram.MECHANISMS["SCRAM-SHA-512"]
    few = scram.credential_from_password(mechanism, "pw", 1000)
    for lookup, message in [(lambda u, m: None, b"n,,n=ghost,r=abc"),
                            (lambda u, m: few, b"n,,n=alice,r=abc"),
                            (lambda u, m: few, b"garbage")]:
        with pytest.raises(scram.ScramFailure):
            scram.ScramServer(mechanism, lookup).evaluate(message)
    good = scram.credential_from_password(mechanism, "pw", 4096)
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        scram.ScramServer(mechanism, lambda u, m: good).evaluate(b"n,a=bob,n=alice,r=abc")
    # Names with , and = travel escaped.
    assert scram.username_of(scram.saslname_of("a,b=c")) == "a,b=c"
    with pytest.raises(scram.ScramFailure):
        scram.username_of("a=2Xb")


@pytest.mark.parametrize("token, message", [
    (b"\x00alice\x00secret", None),
    (b"alice\x00alice\x00secret", None),
    (b"\x00alice\x00wrong", "Invalid username or password"),
    (b"\x00ghost\x00secret", "Invalid username or password"),
    (b"\x00alice", "expected 3 tokens, got 2"),
    (b"\x00a\x00b\x00c", "expected 3 tokens, got 4"),
    (b"\x00\x00secret", "username not specified"),
    (b"\x00alice\x00", "password not specified"),
    (b"bob\x00alice\x00secret", "authorization id that is different"),
])
def test_plain_tokens(token, message):
    server = PlainServer({"alice": "secret"})
    if message is None:
        server.evaluate(token)
        assert server.complete and server.authorization_id == "alice"
    else:
        with pytest.raises(SaslAuthenticationError, match=message):
            server.evaluate(token)


def test_mechanisms_in_kafkas_order():
    assert java_hash_map_order(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")) == (
        "PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")
    assert java_hash_map_order(("SCRAM-SHA-256", "PLAIN")) == ("PLAIN", "SCRAM-SHA-256")
