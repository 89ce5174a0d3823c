"""Differential: Kafka 4.4's ``kafka-configs --entity-type groups`` (``ConfigCommand``)
against the real Kafka 4.4 broker and against ``seglog serve``: setting, describing
(``--describe``, ``--all``), deleting group configs, and the refusals of an invalid value, a
value outside the broker's ``group.*.min/max`` bounds, an unknown name and the default
group. Each command's exit code, output and error message are the same on both.

About 25 JVM starts: with the CLI differential, run on purpose
(``python -m pytest -q -m kafka_tools tests/kafka/test_group_configs_cli_differential.py``
or ``SEGLOG_KAFKA_TOOLS=1``)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from test_kafka_cli_differential import BROKER_CONFIG, SELECT_ENV, TOOL_TIMEOUT_S, _is_selected

from seglog.bench.broker import SeglogServe
from seglog.bench.kafka import KafkaBroker, find_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.kafka_tools]

_REF, _WHY = find_kafka()
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
GROUP = ("--entity-type", "groups", "--entity-name", "cfg-group")

#: (step, ConfigCommand arguments after --bootstrap-server).
STEPS = (
    ("describe-unset", (*GROUP, "--describe")),
    ("set", (*GROUP, "--alter", "--add-config",
             "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000,"
             "consumer.heartbeat.interval.ms=6000")),
    ("describe", (*GROUP, "--describe")),
    ("describe-all", (*GROUP, "--describe", "--all")),
    ("invalid-value", (*GROUP, "--alter", "--add-config", "share.auto.offset.reset=bogus")),
    ("not-a-number", (*GROUP, "--alter", "--add-config", "share.delivery.count.limit=x")),
    ("below-configdef-minimum", (*GROUP, "--alter", "--add-config",
                                 "share.record.lock.duration.ms=100")),
    ("outside-broker-bounds", (*GROUP, "--alter", "--add-config",
                               "share.record.lock.duration.ms=2000")),
    ("unknown-name", (*GROUP, "--alter", "--add-config", "no.such.config=1")),
    ("delete", (*GROUP, "--alter", "--delete-config", "share.auto.offset.reset")),
    ("describe-after-delete", (*GROUP, "--describe")),
    ("describe-entity-type", ("--entity-type", "groups", "--describe")),
)

_EXCEPTION = re.compile(r"^[\w.$]+(?:Exception|Error): (.*)$", re.M)


def _outcome(done: subprocess.CompletedProcess) -> tuple:
    """Exit code, stdout, and the first exception message of stderr (no stack)."""
    found = _EXCEPTION.search(done.stderr)
    return done.returncode, done.stdout.strip(), found.group(1) if found else ""


def _run(bootstrap: str, run_dir: Path) -> dict:
    run_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, args in STEPS:
        cmd = _REF.java_command(CONFIGS, ["--bootstrap-server", bootstrap, *args],
                                run_dir=run_dir)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                                  timeout=TOOL_TIMEOUT_S, check=False)
            out[name] = _outcome(done)
        except subprocess.TimeoutExpired:
            out[name] = (-1, "<timed out>", "")
    return out


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory):
    if not _is_selected(request.config):
        pytest.skip(f"Kafka's tools take minutes: run with -m kafka_tools or {SELECT_ENV}=1")
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    run = tmp_path_factory.mktemp("group-configs-cli")
    kafka = KafkaBroker(_REF, run / "kafka", extra_properties={
        k: v for k, v in BROKER_CONFIG.items() if k != "node.id"})
    kafka.format()
    kafka.start()
    try:
        expected = _run(kafka.bootstrap, run / "kafka-tools")
    finally:
        kafka.stop()
    broker = SeglogServe(run / "seglog", config=BROKER_CONFIG)
    broker.start()
    try:
        got = _run(broker.bootstrap, run / "seglog-tools")
    finally:
        broker.stop()
    return expected, got


@pytest.mark.parametrize("step", [name for name, _ in STEPS])
def test_kafka_configs_on_groups_answers_as_kafka(step, outcomes):
    expected, got = outcomes
    assert got[step] == expected[step]
