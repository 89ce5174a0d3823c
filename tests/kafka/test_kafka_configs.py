"""The config table (:mod:`seglog.config_table`) against Kafka's own: a small Java program
(``java/ConfigDump.java``, compiled with ``javac`` at test time) prints every key of Kafka's
topic ConfigDef (``LogConfig.configKeys()``) and broker ConfigDef
(``AbstractKafkaConfig.CONFIG_DEF``, what ``KafkaConfig`` is built from) with its type,
default, importance and dynamic update mode, and each topic config's broker synonyms
(``ServerTopicConfigSynonyms``); the table must name every one of them, with the same type,
default (as ``ConfigDef.convertToString`` writes it), update mode and synonyms.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from seglog.config_table import (BROKER_CONFIGS, CONFIGS, DYNAMIC_ONLY, KAFKA_VERSION,
                                 TOPIC_CONFIGS)
from seglog.configdef import BOTH, TOPIC, format_value

pytestmark = pytest.mark.kafka

SOURCE = Path(__file__).resolve().parent / "java" / "ConfigDump.java"
RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def kafka_configs(kafka_ref, tmp_path_factory):
    """``{"topic": {name: row}, "broker": {name: row}, "synonyms": {name: [...]}}``."""
    javac = shutil.which("javac") or str(Path(kafka_ref.java).with_name("javac"))
    if not Path(javac).exists() and shutil.which(javac) is None:
        why = "needs javac (a JDK) to compile tests/kafka/java/ConfigDump.java"
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but it {why}", pytrace=False)
        pytest.skip(why)
    out_dir = tmp_path_factory.mktemp("configdump")
    subprocess.run([javac, "-cp", kafka_ref.classpath, "-d", str(out_dir), str(SOURCE)],
                   check=True, timeout=RUN_TIMEOUT_S, capture_output=True)
    result = subprocess.run(
        [kafka_ref.java, "-cp", f"{out_dir}:{kafka_ref.classpath}", "ConfigDump"],
        check=True, timeout=RUN_TIMEOUT_S, capture_output=True, text=True)
    tables: dict[str, dict] = {"topic": {}, "broker": {}, "synonyms": {}}
    for line in result.stdout.splitlines():
        row = json.loads(line)
        tables[row["scope"]][row["name"]] = row
    assert len(tables["topic"]) > 30 and len(tables["broker"]) > 300
    return tables


def test_the_tables_kafka_is_the_one_tested(kafka_ref):
    assert kafka_ref.version == KAFKA_VERSION


def _default(key) -> str | None:
    return format_value(key.type, key.default)


def test_topic_configs_are_kafkas(kafka_configs):
    kafka = kafka_configs["topic"]
    assert set(TOPIC_CONFIGS) == set(kafka)
    for name, row in kafka.items():
        key = TOPIC_CONFIGS[name]
        assert key.type == row["type"], name
        assert key.has_default == row["has_default"], name
        assert _default(key) == row["default"], name
        assert key.internal == row["internal"], name
        if key.scope == TOPIC:
            assert key.importance == row["importance"], name


#: Kafka broker settings that are not in KafkaConfig's ConfigDef: StandardAuthorizer reads them
#: from the broker's configs itself (``StandardAuthorizer.SUPER_USERS_CONFIG``,
#: ``ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG``).
AUTHORIZER_PLUGIN_CONFIGS = {"super.users", "allow.everyone.if.no.acl.found"}


def test_broker_configs_are_kafkas(kafka_configs):
    kafka = kafka_configs["broker"]
    ours = {name for name, key in BROKER_CONFIGS.items() if key.kafka}
    assert AUTHORIZER_PLUGIN_CONFIGS <= ours
    assert not AUTHORIZER_PLUGIN_CONFIGS & set(kafka)
    # Kafka's DynamicConfig.Broker configs (QuotaConfig.brokerQuotaConfigs) are not in
    # KafkaConfig's ConfigDef either.
    assert DYNAMIC_ONLY <= ours and not DYNAMIC_ONLY & set(kafka)
    assert ours - AUTHORIZER_PLUGIN_CONFIGS - DYNAMIC_ONLY == set(kafka), \
        "the table names exactly Kafka's broker configs (and seglog's own)"
    for name, row in kafka.items():
        key = BROKER_CONFIGS[name]
        assert key.type == row["type"], name
        assert key.has_default == row["has_default"], name
        assert _default(key) == row["default"], name
        assert key.dynamic == row["dynamic"], name
        if key.scope != BOTH:
            assert key.importance == row["importance"], name


def test_seglogs_own_configs_are_not_kafkas(kafka_configs):
    own = [key.name for key in CONFIGS if not key.kafka]
    assert own, "zookeeper.connect and its kin"
    assert not set(own) & (set(kafka_configs["broker"]) | set(kafka_configs["topic"]))


def test_synonyms_are_kafkas(kafka_configs):
    for name, row in kafka_configs["synonyms"].items():
        key = TOPIC_CONFIGS[name]
        expected = tuple(row["synonyms"])
        ours = key.synonyms or ((name,) if key.scope == BOTH else ())
        assert ours == expected, name
    for name, key in TOPIC_CONFIGS.items():
        if key.synonyms:
            assert name in kafka_configs["synonyms"], name
