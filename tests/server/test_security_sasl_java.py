"""Kafka's own Java tools over SASL_PLAINTEXT (Kafka 4.4's jars): ``kafka-configs`` makes a
SCRAM user (AlterUserScramCredentials, as an operator does it), then the
console producer and consumer log in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 through a
client properties file; a wrong password is a clear error from the Java client."""

from __future__ import annotations

import subprocess

import pytest

from seglog.bench.kafka import find_kafka

from sasl_helpers import sasl_broker_config

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.clients]

_REF, _WHY = find_kafka()
TOOL_TIMEOUT_S = 90
LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                 "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                 "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}



def _client_properties(path, mechanism, user, password):
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={LOGIN_MODULES[mechanism]} required username="{user}" '
        f'password="{password}";\n', encoding="utf-8")
    return str(path)


def test_kafka_configs_and_console_clients(broker_factory, kafka_ref, tmp_path):
    broker = broker_factory(config=sasl_broker_config(), data_dir=tmp_path / "data")
    admin = _client_properties(tmp_path / "admin.properties", "PLAIN", "admin", "admin-secret")

    def tool(main_class, *args, stdin=None):
        cmd = kafka_ref.java_command(main_class, ["--bootstrap-server", broker.bootstrap,
                                                  *args], run_dir=tmp_path)
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                              timeout=TOOL_TIMEOUT_S, check=False)

    configs = "org.apache.kafka.tools.ConfigCommand"
    # One mechanism per request: Kafka 4.4 refuses two credentials of one user in one
    # AlterUserScramCredentials (DUPLICATE_RESOURCE; the differential test shows it).
    for credential in ("SCRAM-SHA-256=[iterations=8192,password=bob-secret]",
                       "SCRAM-SHA-512=[password=bob-512]"):
        done = tool(configs, "--command-config", admin, "--alter", "--add-config", credential,
                    "--entity-type", "users", "--entity-name", "bob")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Completed updating config for user bob." in done.stdout
    # (``kafka-configs --describe --entity-type users`` also needs DescribeClientQuotas, the
    # quotas' API: described here with confluent-kafka instead.)
    from confluent_kafka.admin import AdminClient

    described_admin = AdminClient({
        "bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})
    described = described_admin.describe_user_scram_credentials(["bob"])["bob"].result(30)
    assert sorted((info.mechanism.name, info.iterations)
                  for info in described.scram_credential_infos) == [
        ("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 4096)]
    broker.store.create_topic("jt", partitions=1)
    logins = [("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "bob", "bob-secret"),
              ("SCRAM-SHA-512", "bob", "bob-512")]
    for mechanism, user, password in logins:
        props = _client_properties(tmp_path / f"{mechanism}.properties", mechanism, user,
                                   password)
        done = tool("org.apache.kafka.tools.ConsoleProducer", "--topic", "jt",
                    "--command-config", props, stdin=f"from-{mechanism}\n")
        assert done.returncode == 0, done.stderr[-2000:]
    props = _client_properties(tmp_path / "c.properties", "SCRAM-SHA-512", "bob", "bob-512")
    done = tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--topic", "jt",
                "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000",
                "--command-config", props)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [f"from-{m}" for m, _, _ in logins]
    bad = _client_properties(tmp_path / "bad.properties", "SCRAM-SHA-256", "bob", "nope")
    done = tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--topic", "jt",
                "--from-beginning", "--max-messages", "1", "--timeout-ms", "10000",
                "--command-config", bad)
    assert "Processed a total of 0 messages" in done.stderr + done.stdout
    assert ("Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-256") in done.stderr
