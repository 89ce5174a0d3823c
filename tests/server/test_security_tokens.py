"""Delegation tokens (KIP-48, issue 23): Kafka's ``kafka-delegation-tokens`` tool creates,
describes, renews and expires tokens over SASL_PLAINTEXT; a client logs in with SCRAM, the
token id and its HMAC (``tokenauth=true``) as the token's owner, and such a principal may not
use the token APIs; without ``delegation.token.secret.key`` they answer
DELEGATION_TOKEN_AUTH_DISABLED, and on a PLAINTEXT listener DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
tokens survive a restart."""

from __future__ import annotations

import base64
import datetime
import os
import re
import subprocess

import pytest

from seglog.bench.kafka import find_kafka
from seglog.sasl.scram import MECHANISMS, ScramClient

from sasl_helpers import RawClient, sasl_broker_config

SECRET = {"delegation.token.secret.key": "token-secret"}
_REF, _WHY = find_kafka()
TOOL_TIMEOUT_S = 90


def _admin(broker, user="alice", password="alice-secret"):
    client = RawClient(broker.bootstrap)
    assert client.login("PLAIN", user, password)[-1].error_code == 0
    return client


def _create(client, renewers=(), max_lifetime_ms=-1, owner=None, code_only=False):
    m = client.m(38, 3)
    call = client.error_code if code_only else client.call
    return call(38, 3, owner_principal_type="User" if owner else None,
                owner_principal_name=owner,
                renewers=tuple(m.CreatableRenewers(principal_type=t, principal_name=n)
                               for t, n in renewers),
                max_lifetime=datetime.timedelta(milliseconds=max_lifetime_ms))


def _token_login(broker, token_id, hmac_bytes, mechanism="SCRAM-SHA-256"):
    client = RawClient(broker.bootstrap)
    assert client.handshake(mechanism).error_code == 0
    scram = ScramClient(MECHANISMS[mechanism], token_id, base64.b64encode(hmac_bytes).decode(),
                        extensions={"tokenauth": "true"})
    first = client.authenticate(scram.first())
    if first.error_code != 0:
        return client, first
    final = client.authenticate(scram.final(first.auth_bytes))
    if final.error_code == 0:
        scram.verify(final.auth_bytes)
    return client, final


def test_token_lifecycle_and_login(broker_factory, tmp_path):
    data = tmp_path / "d"
    broker = broker_factory(config=sasl_broker_config(**SECRET), data_dir=data)
    alice = _admin(broker)
    created = _create(alice, renewers=[("User", "admin")])
    assert created.error_code == 0
    assert (created.principal_type, created.principal_name) == ("User", "alice")
    assert created.token_requester_principal_name == "alice"
    assert created.max_timestamp - created.issue_timestamp == datetime.timedelta(days=7)
    assert created.expiry_timestamp - created.issue_timestamp == datetime.timedelta(days=1)
    token_id, hmac_bytes = created.token_id, created.hmac
    # A SCRAM login with the token: the owner's principal, token-authenticated.
    client, final = _token_login(broker, token_id, hmac_bytes, "SCRAM-SHA-512")
    assert final.error_code == 0
    # ...which may not use the token APIs (Kafka's allowTokenRequests).
    assert _create(client, code_only=True) == 64  # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    _, bad = _token_login(broker, token_id, b"not-the-hmac")
    assert bad.error_code == 58
    _, unknown = _token_login(broker, "no-such-token", hmac_bytes)
    assert unknown.error_code == 58
    # Describe, renew (a renewer may), expire.
    described = alice.call(41, 3, owners=None)
    assert [t.token_id for t in described.tokens] == [token_id]
    assert [(r.principal_type, r.principal_name) for r in described.tokens[0].renewers] == [
        ("User", "admin")]
    assert alice.call(41, 3, owners=()).tokens == ()
    admin = _admin(broker, "admin", "admin-secret")
    renewed = admin.call(39, 2, hmac=hmac_bytes,
                         renew_period=datetime.timedelta(milliseconds=60_000))
    assert renewed.error_code == 0
    assert admin.error_code(39, 2, hmac=b"x", renew_period=datetime.timedelta(0)) == 62
    broker.stop()
    broker = broker_factory(config=sasl_broker_config(**SECRET), data_dir=data)
    assert _token_login(broker, token_id, hmac_bytes)[1].error_code == 0  # survived
    alice = _admin(broker)
    expired = alice.call(40, 2, hmac=hmac_bytes,
                         expiry_time_period=datetime.timedelta(milliseconds=-1))
    assert expired.error_code == 0
    assert _token_login(broker, token_id, hmac_bytes)[1].error_code == 58
    assert alice.call(41, 3, owners=None).tokens == ()


def test_tokens_disabled_and_not_allowed(broker_factory, broker, tmp_path):
    no_secret = broker_factory(config=sasl_broker_config(), data_dir=tmp_path / "n")
    client = _admin(no_secret)
    assert _create(client, code_only=True) == 61  # DELEGATION_TOKEN_AUTH_DISABLED
    assert client.call(41, 3, owners=None).error_code == 61
    plaintext = RawClient(broker.bootstrap)
    assert _create(plaintext, code_only=True) == 64  # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    bad_renewer = _create(_admin(broker_factory(config=sasl_broker_config(**SECRET),
                                                data_dir=tmp_path / "r")),
                          renewers=[("Group", "g")], code_only=True)
    assert bad_renewer == 67  # INVALID_PRINCIPAL_TYPE


@pytest.mark.kafka
@pytest.mark.slow
def test_kafka_delegation_tokens_tool(broker_factory, tmp_path):
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    broker = broker_factory(config=sasl_broker_config(**SECRET), data_dir=tmp_path / "d")
    props = tmp_path / "alice.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule"
                     ' required username="alice" password="alice-secret";\n')

    def tool(*args):
        cmd = _REF.java_command("org.apache.kafka.tools.DelegationTokenCommand",
                                ["--bootstrap-server", broker.bootstrap, "--command-config",
                                 str(props), *args], run_dir=tmp_path)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout

    out = tool("--create", "--max-life-time-period", "-1", "--renewer-principal",
               "User:admin")
    match = re.search(r"\n(\S+)\s+(\S+)\s+User:alice", out)
    assert match, out
    token_id, hmac_text = match.group(1), match.group(2)
    # (Without --owner-principal the tool sends an empty owner list, which Kafka answers with
    # no tokens: seglog too.)
    assert "Total number of tokens : 0" in tool("--describe")
    out = tool("--describe", "--owner-principal", "User:alice")
    assert token_id in out and "User:admin" in out
    out = tool("--renew", "--hmac", hmac_text, "--renew-time-period", "60000")
    assert "Completed renew operation" in out
    # Kafka's Java producer logs in with the token.
    token_props = tmp_path / "token.properties"
    token_props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{token_id}" password="{hmac_text}" tokenauth=true;\n')
    broker.store.create_topic("tok", partitions=1)
    cmd = _REF.java_command("org.apache.kafka.tools.ConsoleProducer",
                            ["--bootstrap-server", broker.bootstrap, "--topic", "tok",
                             "--command-config", str(token_props)], run_dir=tmp_path)
    done = subprocess.run(cmd, input="via-token\n", capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert broker.store.topic("tok").log(0).end_offset == 1
    out = tool("--expire", "--hmac", hmac_text, "--expiry-time-period", "-1")
    assert "Completed expire operation" in out
    assert token_id not in tool("--describe", "--owner-principal", "User:alice")
