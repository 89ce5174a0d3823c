"""Kafka 4.4's own command-line tools against Apache Kafka and against ``seglog serve``: the
same commands, in the same order, on a fresh broker of each; outputs compared with only ids,
times, hosts, paths and measured figures masked.

One script (:data:`STEPS`) runs the tools a Kafka user reaches for: kafka-topics,
kafka-configs, the console producer and consumer, kafka-get-offsets, kafka-consumer-groups
(describe, reset and delete offsets, delete), kafka-delete-records, kafka-log-dirs,
kafka-transactions, kafka-leader-election, kafka-reassign-partitions, kafka-features,
kafka-client-metrics, the producer and consumer perf tools, the verifiable producer and
consumer, and the end-to-end latency tool. Each step's exit code and masked output must be
the same on both brokers, except the steps named in :data:`KNOWN_DIFFERENT`, each with the
reason; a known difference that goes away fails the test too, so the list only shrinks.

About 60 JVM starts (1.5-4 s each here): too long for the default run. CI runs it on purpose
(``python -m pytest -q -m kafka_tools tests/kafka/test_kafka_cli_differential.py``), and so
does ``SEGLOG_KAFKA_TOOLS=1``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from seglog.bench.broker import SeglogServe
from seglog.bench.kafka import KafkaBroker, find_kafka

pytestmark = [pytest.mark.kafka, pytest.mark.kafka_tools]

_REF, _WHY = find_kafka()
TOOL_TIMEOUT_S = 120
SELECT_ENV = "SEGLOG_KAFKA_TOOLS"

#: What both brokers run with (Kafka's test-harness settings for one broker; node id 1 on both
#: so that leader and replica columns read the same).
BROKER_CONFIG = {
    "node.id": "1",
    "num.partitions": "1",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

TOPIC = "cli"
GROUP = "cli-group"


def _is_selected(config) -> bool:
    return (os.environ.get(SELECT_ENV, "") not in ("", "0")
            or "kafka_tools" in (config.option.markexpr or ""))


@pytest.fixture(autouse=True)
def _selected(request):
    if not _is_selected(request.config):
        pytest.skip(f"the CLI differential takes minutes: run it with -m kafka_tools or "
                    f"{SELECT_ENV}=1")


# --- masking -----------------------------------------------------------------------------

_UUID = re.compile(r"\b[A-Za-z0-9_-]{22}\b")  # Kafka's base64 topic and cluster ids
_DASHED_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_HOST_PORT = re.compile(r"/?127\.0\.0\.1:\d+|localhost:\d+|/127\.0\.0\.1\b")
_NUMBER = re.compile(r"\d+(\.\d+)?")


def mask_ids(text: str) -> str:
    """Ids, member ids, hosts and ports replaced by placeholders."""
    text = _DASHED_UUID.sub("<uuid>", text)
    text = re.sub(r"\b(console-consumer|consumer-[\w.-]+|rdkafka|producer-\d+)-[\w-]{20,}",
                  "<member>", text)
    text = _UUID.sub("<id>", text)
    text = _HOST_PORT.sub("<host>", text)
    return text


def mask_numbers(text: str) -> str:
    """Every number masked too: for the perf tools, whose figures are measurements."""
    return _NUMBER.sub("<n>", mask_ids(text))


def sorted_lines(text: str) -> str:
    """Lines sorted: for outputs whose order follows partitions' fetch order."""
    return "\n".join(sorted(line for line in text.splitlines() if line.strip()))


def json_event_names(text: str) -> str:
    """The ``name`` of each JSON line (the verifiable tools' events), in order, deduplicated
    in runs (how many ``records_consumed`` events a consumer prints depends on fetch sizes)."""
    names: list[str] = []
    for line in text.splitlines():
        try:
            name = json.loads(line).get("name")
        except (ValueError, AttributeError):
            continue
        if name and (not names or names[-1] != name):
            names.append(name)
    return "\n".join(names)


def log_dirs_shape(text: str) -> str:
    """kafka-log-dirs' JSON with sizes, offsets lag and paths masked: which partitions are on
    which broker, and the errors."""
    for line in text.splitlines():
        if line.startswith("{"):
            data = json.loads(line)
            for broker in data.get("brokers", []):
                for log_dir in broker.get("logDirs", []):
                    log_dir["logDir"] = "<dir>"
                    for partition in log_dir.get("partitions", []):
                        partition["size"] = "<n>"
            return json.dumps(data, sort_keys=True)
    return mask_ids(text)


#: Features that only a KRaft cluster has: the metadata log's version, the quorum's, and
#: KIP-966's eligible leader replicas (kept in the KRaft metadata log). A ZooKeeper-era cluster
#: has none of them (docs/compatibility.md).
KRAFT_ONLY_FEATURES = ("metadata.version", "kraft.version", "eligible.leader.replicas.version")


def features_shape(text: str) -> str:
    """kafka-features describe without the KRaft-only features, epochs masked."""
    return "\n".join(re.sub(r"Epoch: \d+", "Epoch: <n>", line) for line in text.splitlines()
                     if line.strip() and not any(f"Feature: {name} " in line
                                                 for name in KRAFT_ONLY_FEATURES))


# --- the script --------------------------------------------------------------------------

@dataclass
class Step:
    """One tool run: ``name``, the tool's main class, its arguments (``{bootstrap}`` and
    ``{dir}`` are filled in), optional stdin text, and how its stdout is normalised before
    the comparison."""

    name: str
    main_class: str
    args: list[str]
    stdin: str | None = None
    normalise: Callable[[str], str] = mask_ids
    files: dict[str, str] = field(default_factory=dict)  # name -> content, written to {dir}


TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
BOOT = ["--bootstrap-server", "{bootstrap}"]

STEPS: list[Step] = [
    Step("topics-create", TOPICS, [*BOOT, "--create", "--topic", TOPIC, "--partitions", "3",
                                   "--replication-factor", "1"]),
    Step("topics-list", TOPICS, [*BOOT, "--list", "--exclude-internal"]),
    Step("topics-describe", TOPICS, [*BOOT, "--describe", "--topic", TOPIC]),
    Step("topics-alter-partitions", TOPICS, [*BOOT, "--alter", "--topic", TOPIC,
                                             "--partitions", "4"]),
    Step("configs-alter-topic", CONFIGS, [*BOOT, "--alter", "--entity-type", "topics",
                                          "--entity-name", TOPIC, "--add-config",
                                          "retention.ms=86400000,cleanup.policy=delete"]),
    Step("configs-describe-topic", CONFIGS, [*BOOT, "--describe", "--entity-type", "topics",
                                             "--entity-name", TOPIC]),
    Step("configs-describe-broker", CONFIGS, [*BOOT, "--describe", "--entity-type", "brokers",
                                              "--entity-name", "1"]),
    Step("configs-describe-broker-all", CONFIGS,
         [*BOOT, "--describe", "--all", "--entity-type", "brokers", "--entity-name", "1"],
         normalise=lambda text: "\n".join(sorted(
             re.sub(r"=.*", "", line.strip()) for line in text.splitlines()
             if "sensitive=" in line))),
    Step("console-producer", PRODUCER,
         [*BOOT, "--topic", TOPIC, "--property", "parse.key=true", "--property",
          "key.separator=:"],
         stdin="".join(f"k{i}:v{i}\n" for i in range(20))),
    Step("console-consumer", CONSUMER,
         [*BOOT, "--topic", TOPIC, "--from-beginning", "--max-messages", "20",
          "--property", "print.key=true", "--property", "print.partition=true",
          "--group", GROUP, "--timeout-ms", "30000"],
         normalise=lambda text: sorted_lines(mask_ids(text))),
    Step("get-offsets", "org.apache.kafka.tools.GetOffsetShell",
         [*BOOT, "--topic", TOPIC], normalise=sorted_lines),
    Step("groups-list", GROUPS, [*BOOT, "--list"]),
    Step("groups-describe", GROUPS, [*BOOT, "--describe", "--group", GROUP],
         normalise=lambda text: sorted_lines(mask_ids(text))),
    Step("groups-reset-dry-run", GROUPS, [*BOOT, "--reset-offsets", "--group", GROUP,
                                          "--topic", TOPIC, "--to-earliest", "--dry-run"],
         normalise=lambda text: sorted_lines(mask_ids(text))),
    Step("groups-reset-execute", GROUPS, [*BOOT, "--reset-offsets", "--group", GROUP,
                                          "--topic", f"{TOPIC}:0", "--to-offset", "1",
                                          "--execute"],
         normalise=lambda text: sorted_lines(mask_ids(text))),
    Step("groups-delete-offsets", GROUPS, [*BOOT, "--delete-offsets", "--group", GROUP,
                                           "--topic", TOPIC],
         normalise=lambda text: sorted_lines(mask_ids(text))),
    Step("groups-delete", GROUPS, [*BOOT, "--delete", "--group", GROUP]),
    Step("delete-records", "org.apache.kafka.tools.DeleteRecordsCommand",
         [*BOOT, "--offset-json-file", "{dir}/delete.json"],
         files={"delete.json": json.dumps({"partitions": [
             {"topic": TOPIC, "partition": p, "offset": 1} for p in range(3)], "version": 1})},
         normalise=lambda text: sorted_lines(mask_ids(text))),
    Step("get-offsets-earliest", "org.apache.kafka.tools.GetOffsetShell",
         [*BOOT, "--topic", TOPIC, "--time", "-2"], normalise=sorted_lines),
    Step("log-dirs", "org.apache.kafka.tools.LogDirsCommand",
         [*BOOT, "--describe", "--topic-list", TOPIC], normalise=log_dirs_shape),
    Step("transactions-list", "org.apache.kafka.tools.TransactionsCommand",
         [*BOOT, "list"]),
    Step("leader-election", "org.apache.kafka.tools.LeaderElectionCommand",
         [*BOOT, "--election-type", "preferred", "--all-topic-partitions"]),
    Step("reassign-list", "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
         [*BOOT, "--list"]),
    Step("features-describe", "org.apache.kafka.tools.FeatureCommand", [*BOOT, "describe"],
         normalise=features_shape),
    Step("client-metrics-list", "org.apache.kafka.tools.ClientMetricsCommand",
         [*BOOT, "--list"]),
    Step("producer-perf", "org.apache.kafka.tools.ProducerPerformance",
         ["--topic", TOPIC, "--num-records", "2000", "--record-size", "100",
          "--throughput", "-1", "--producer-props", "bootstrap.servers={bootstrap}",
          "acks=all"], normalise=mask_numbers),
    Step("consumer-perf", "org.apache.kafka.tools.ConsumerPerformance",
         [*BOOT, "--topic", TOPIC, "--messages", "2000", "--timeout", "30000"],
         normalise=mask_numbers),
    Step("verifiable-producer", "org.apache.kafka.tools.VerifiableProducer",
         [*BOOT, "--topic", TOPIC, "--max-messages", "50", "--acks", "-1"],
         normalise=json_event_names),
    Step("verifiable-consumer", "org.apache.kafka.tools.VerifiableConsumer",
         [*BOOT, "--topic", TOPIC, "--group-id", "verifiable", "--max-messages", "50",
          "--reset-policy", "earliest"], normalise=json_event_names),
    Step("e2e-latency", "org.apache.kafka.tools.EndToEndLatency",
         ["{bootstrap}", TOPIC, "200", "all", "100"], normalise=mask_numbers),
]

#: Steps whose answers differ on purpose or for a reason being worked on, with the reason.
#: The test fails when one of them answers the same on both brokers (take it out then).
KNOWN_DIFFERENT: dict[str, str] = {
    "configs-describe-broker-all": "DescribeConfigs lists the configs seglog takes and the "
                                   "refused ones whose Kafka default describes it "
                                   "(config_table.DESCRIBE_RULE); every other name is named "
                                   "with its reason in tests/server/"
                                   "test_admin_configs_differential.py",
}


@dataclass
class Outcome:
    """One step's exit code and normalised stdout (stderr kept for the failure report)."""

    returncode: int
    stdout: str
    stderr: str


def run_script(ref, bootstrap: str, run_dir: Path) -> dict[str, Outcome]:
    """Every step of :data:`STEPS` against ``bootstrap``, in order."""
    outcomes: dict[str, Outcome] = {}
    run_dir.mkdir(parents=True, exist_ok=True)
    for step in STEPS:
        for name, content in step.files.items():
            (run_dir / name).write_text(content, encoding="utf-8")
        args = [a.replace("{bootstrap}", bootstrap).replace("{dir}", str(run_dir))
                for a in step.args]
        cmd = ref.java_command(step.main_class, args, run_dir=run_dir)
        try:
            done = subprocess.run(cmd, input=step.stdin or "", capture_output=True, text=True,
                                  errors="replace", timeout=TOOL_TIMEOUT_S, check=False)
            outcomes[step.name] = Outcome(done.returncode, step.normalise(done.stdout),
                                          done.stderr[-3000:])
        except subprocess.TimeoutExpired:
            outcomes[step.name] = Outcome(-1, "<timed out>", "")
    return outcomes


@pytest.fixture(scope="module")
def kafka_outcomes(request, tmp_path_factory):
    # Module-scoped fixtures are set up before the function-scoped _selected: check here too.
    if not _is_selected(request.config):
        pytest.skip(f"the CLI differential takes minutes: run it with -m kafka_tools or "
                    f"{SELECT_ENV}=1")
    if _REF is None:
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    run = tmp_path_factory.mktemp("kafka-cli")
    kafka = KafkaBroker(_REF, run / "broker",
                        extra_properties={k: v for k, v in BROKER_CONFIG.items()
                                          if k != "node.id"})
    kafka.format()
    kafka.start()
    try:
        return run_script(_REF, kafka.bootstrap, run / "tools")
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def seglog_outcomes(tmp_path_factory, kafka_outcomes):
    run = tmp_path_factory.mktemp("seglog-cli")
    broker = SeglogServe(run / "data", config=BROKER_CONFIG)
    broker.start()
    try:
        return run_script(_REF, broker.bootstrap, run / "tools")
    finally:
        broker.stop()


@pytest.fixture(scope="module", autouse=True)
def _dump(request):
    """With ``SEGLOG_KAFKA_TOOLS_DUMP=<file>``, both brokers' outcomes as JSON (to read what
    each tool printed). Module-scoped autouse fixtures run before ``_selected``: nothing is
    started here unless the module is selected."""
    target = os.environ.get("SEGLOG_KAFKA_TOOLS_DUMP")
    if target and _is_selected(request.config):
        kafka_outcomes = request.getfixturevalue("kafka_outcomes")
        seglog_outcomes = request.getfixturevalue("seglog_outcomes")
        Path(target).write_text(json.dumps(
            {name: {"kafka": vars(kafka_outcomes[name]), "seglog": vars(seglog_outcomes[name])}
             for name in kafka_outcomes}, indent=1), encoding="utf-8")


@pytest.mark.parametrize("step", [s.name for s in STEPS])
def test_tool_answers_as_kafka(step, kafka_outcomes, seglog_outcomes):
    kafka, seglog = kafka_outcomes[step], seglog_outcomes[step]
    same = (kafka.returncode, kafka.stdout) == (seglog.returncode, seglog.stdout)
    if step in KNOWN_DIFFERENT:
        assert not same, (f"{step} now answers as Kafka does: take it out of KNOWN_DIFFERENT "
                          f"({KNOWN_DIFFERENT[step]})")
        return
    assert kafka.returncode == 0, f"{step} failed on Kafka itself: {kafka.stderr}"
    assert same, (f"{step}:\n--- kafka (rc {kafka.returncode})\n{kafka.stdout}\n"
                  f"--- seglog (rc {seglog.returncode})\n{seglog.stdout}\n"
                  f"--- seglog stderr\n{seglog.stderr}")


if __name__ == "__main__":  # pragma: no cover - a manual run prints both outputs per step
    sys.exit(pytest.main([__file__, "-m", "kafka_tools", "-q"]))
