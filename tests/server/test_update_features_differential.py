"""UpdateFeatures (API 57 v0-v2) against the real Kafka 4.4 broker: the refusals seglog and
Kafka give alike (a level above what the broker supports, a negative level, an unknown
upgrade type, an unknown feature, v0's downgrade flag, validate-only), the per-feature results
of v0-v1 and their absence in v2. The same raw requests go to ``seglog serve`` and, where java
and the jars are present, to Kafka; both must give :data:`EXPECTED`, which records what
Kafka 4.4.0 answered.

seglog builds no feature level yet (``seglog.features``: every ``max_level`` 0), so its
refusal of a real feature's level says "does not support this feature" where Kafka says which
versions it supports; the probes compare codes always and messages where both brokers' tables
agree (features neither supports)."""

from __future__ import annotations

import pytest

from test_data_differential import Wire

FAILED = ("The update failed for all features since the following feature had an error: "
          "Invalid update version {level} for feature {name}. ")


def _update(wire, version, updates, **extra):
    module = wire.module(57, version)
    entries = []
    for name, level, how in updates:
        if version == 0:
            entries.append(module.FeatureUpdateKey(feature=name, max_version_level=level,
                                                   allow_downgrade=how))
        else:
            entries.append(module.FeatureUpdateKey(feature=name, max_version_level=level,
                                                   upgrade_type=how))
    response = wire.call(57, version, timeout_ms=30000, feature_updates=tuple(entries),
                         **extra)
    results = getattr(response, "results", None)
    return (int(response.error_code), response.error_message,
            None if results is None else [(r.feature, int(r.error_code), r.error_message)
                                          for r in results])


def probe(bootstrap):
    """Every probe's answer, by name."""
    wire = Wire(bootstrap)
    out = {}
    try:
        out["unknown feature"] = _update(wire, 2, [("seglog.nothing", 1, 1)])
        out["negative level"] = _update(wire, 1, [("seglog.nothing", -1, 1)])
        out["unknown upgrade type"] = _update(wire, 1, [("seglog.nothing", 1, 0)])
        out["level above supported max"] = _update(wire, 2, [("transaction.version", 99, 1)])
        out["v0 unknown feature"] = _update(wire, 0, [("seglog.nothing", 2, True)])
        out["v1 validate only, level 0 of unknown"] = _update(
            wire, 1, [("seglog.nothing", 0, 1)], validate_only=True)
        out["no updates v1"] = _update(wire, 1, [], validate_only=False)
        out["no updates v2"] = _update(wire, 2, [], validate_only=False)
    finally:
        wire.close()
    # What differs by design (the supported ranges): the code only.
    code, message, results = out["level above supported max"]
    out["level above supported max"] = (code, message.startswith(FAILED.format(
        level=99, name="transaction.version")), results)
    return out


EXPECTED = {
    "unknown feature": (95, FAILED.format(level=1, name="seglog.nothing")
                        + "Local controller 1 does not support this feature.", None),
    "negative level": (95, FAILED.format(level=-1, name="seglog.nothing")
                       + "A feature version cannot be less than 0.", []),
    "unknown upgrade type": (95, FAILED.format(level=1, name="seglog.nothing")
                             + "The controller does not support the given upgrade type.", []),
    "level above supported max": (95, True, None),
    "v0 unknown feature": (95, FAILED.format(level=2, name="seglog.nothing")
                           + "Local controller 1 does not support this feature.", []),
    "v1 validate only, level 0 of unknown": (95, FAILED.format(level=0, name="seglog.nothing")
                                             + "Feature seglog.nothing not found.", []),
    "no updates v1": (0, None, []),
    "no updates v2": (0, None, None),
}


def _compare(got):
    assert {k: v for k, v in got.items() if v != EXPECTED.get(k)} == {}
    assert set(got) == set(EXPECTED)


def test_seglog_answers_as_kafka(broker):
    _compare(probe(broker.bootstrap))


@pytest.mark.kafka
@pytest.mark.slow
def test_kafka_answers_as_recorded(kafka_shared):
    # The shared broker: every probe is refused, so no feature level changes.
    _compare(probe(kafka_shared.bootstrap))


def test_broker_advertises_the_finalized_features_it_holds(broker_factory, tmp_path):
    # The lone broker keeps them in its data directory; a restart reads them back (the
    # epoch shows it: seglog builds no feature level to finalize yet).
    from seglog.cluster.features_store import write_feature_file

    data_dir = tmp_path / "data"
    broker = broker_factory(data_dir=data_dir)
    broker.stop()
    write_feature_file(data_dir, 5, {})
    broker = broker_factory(data_dir=data_dir)
    assert broker.server.finalized_features == (5, {})
    from kio.serial import entity_reader

    from core_helpers import connect, read_frame, request_frame
    from seglog.schemas import load_response_schema

    with connect(broker) as sock:  # ApiVersions v3 (its response header has no tags)
        sock.sendall(request_frame(18, 3, 1, b"\x02t\x021\x00", flexible=True))
        frame = read_frame(sock)
    response, _ = entity_reader(load_response_schema(18, 3))(frame, 4)
    assert response.finalized_features_epoch == 5


def _feature_lines(text):
    import re

    return {re.sub(r"Epoch: \d+", "Epoch: <n>", line) for line in text.splitlines()
            if line.startswith("Feature: ")}


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.kafka_tools  # a JVM per step: .ci/run runs it; the raw requests are compared
# by test_kafka_answers_as_recorded and test_seglog_answers_as_kafka
def test_kafka_features_tool_gives_kafkas_answers(broker, kafka_shared, tmp_path):
    # The shared broker: the upgrades and downgrades below are all refused or dry runs.
    ref, kafka = kafka_shared.ref, kafka_shared
    commands = (["describe"],
                ["upgrade", "--feature", "seglog.nothing=1", "--dry-run"],
                ["upgrade", "--feature", "seglog.nothing=1"],
                ["upgrade", "--feature", "transaction.version=99"],
                ["downgrade", "--feature", "seglog.nothing=0"])
    outputs = {}
    for name, bootstrap in (("kafka", kafka.bootstrap), ("seglog", broker.bootstrap)):
        outputs[name] = []
        for args in commands:
            done = ref.run_tool("org.apache.kafka.tools.FeatureCommand",
                                ["--bootstrap-server", bootstrap, *args],
                                run_dir=tmp_path, timeout_s=60)
            outputs[name].append((done.returncode, done.stdout, done.stderr))
    kafka_out, seglog_out = outputs["kafka"], outputs["seglog"]
    # describe: every feature seglog lists is listed by Kafka alike (epochs masked).
    assert seglog_out[0][0] == kafka_out[0][0] == 0
    assert _feature_lines(seglog_out[0][1]) <= _feature_lines(kafka_out[0][1])
    # Refusals of a feature neither supports, and downgrading it to 0: the same words.
    for index in (1, 2, 4):
        assert seglog_out[index][:2] == kafka_out[index][:2], commands[index]
    assert "1 out of 1 operation(s) failed." in seglog_out[1][2]
    # A level above what the broker supports: refused by both (the supported range differs).
    assert seglog_out[3][0] == kafka_out[3][0] == 1
    assert "Could not upgrade transaction.version to 99. The update failed" in seglog_out[3][1]


def test_update_features_needs_alter_on_the_cluster(broker_factory):
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       AdminClient, ResourcePatternType, ResourceType)

    broker = broker_factory(config={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})
    wire = Wire(broker.bootstrap)
    try:
        # No ACL on the cluster yet: everyone may (the refusal is then the level's).
        assert _update(wire, 1, [("seglog.nothing", 1, 1)])[0] == 95
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                             "User:bob", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
        for future in admin.create_acls([binding]).values():
            future.result(30)
        code, _message, results = _update(wire, 1, [("seglog.nothing", 1, 1)])
        assert (code, results) == (31, [])  # CLUSTER_AUTHORIZATION_FAILED, top level
    finally:
        wire.close()
