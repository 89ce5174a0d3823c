"""The streams group schemas seglog writes by hand (``seglog.schemas``: StreamsGroupHeartbeat
v1, StreamsGroupDescribe v1, StreamsGroupTopologyDescriptionUpdate v0) and kio's v0 of the
first two, read by Kafka 4.4's own generated classes: every field of every schema is filled
(nested entities, nullable structs present and null, arrays of two), written with kio,
read and written back by ``java/SchemaRoundTrip.java``, and the bytes must come back the
same, all of them read. The same for the ``__consumer_offsets`` records a streams group is
kept in (``seglog.coordinator.streams_group_records``), which a coordinator loads back.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import os
import shutil
import subprocess
import typing
from pathlib import Path

import pytest
from kio.serial import entity_writer

from seglog.coordinator import streams_group as sg
from seglog.coordinator import streams_group_records as rec
from seglog.schemas import load_request_schema, load_response_schema

pytestmark = pytest.mark.kafka

SOURCE = Path(__file__).parent / "java" / "SchemaRoundTrip.java"
CASES = [(88, 0), (88, 1), (89, 0), (89, 1), (93, 0)]
_JAVA_NAMES = {88: "StreamsGroupHeartbeat", 89: "StreamsGroupDescribe",
               93: "StreamsGroupTopologyDescriptionUpdate"}


def _value(hint, kafka_type, seed: int, *, nulls: bool):
    """A value of a field: ``seed`` varies it; ``nulls`` leaves nullable fields null."""
    args = typing.get_args(hint)
    if type(None) in args:
        if nulls:
            return None
        hint = next(a for a in args if a is not type(None))
    if typing.get_origin(hint) is tuple:
        element = typing.get_args(hint)[0]
        return tuple(_value(element, kafka_type, seed + i, nulls=nulls) for i in range(2))
    if dataclasses.is_dataclass(hint):
        return _fill(hint, seed, nulls=nulls)
    base = hint
    while hasattr(base, "__supertype__"):
        base = base.__supertype__
    if kafka_type == "timedelta_i32":
        return datetime.timedelta(milliseconds=1000 + seed)
    if kafka_type == "bool":
        return True
    if kafka_type == "error_code":
        return base(16)
    if isinstance(base, type) and issubclass(base, str):
        return f"s{seed}"
    if kafka_type in ("int8",):
        return base(seed % 100)
    if kafka_type in ("int16", "uint16"):
        return base(100 + seed)
    return base(10_000 + seed)


def _fill(cls, seed: int = 1, *, nulls: bool = False):
    hints = typing.get_type_hints(cls)
    values = {}
    for i, f in enumerate(dataclasses.fields(cls)):
        values[f.name] = _value(hints[f.name], f.metadata.get("kafka_type"), seed + i,
                                nulls=nulls)
    return cls(**values)


def _encode(entity) -> str:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue().hex()


def _round_trip(kafka_ref, tmp_path, lines: list[tuple[str, int, str]]) -> None:
    """Kafka's classes read each ``(class, version, hex)`` and write the same bytes back."""
    javac = shutil.which("javac") or str(Path(kafka_ref.java).with_name("javac"))
    if not Path(javac).exists() and shutil.which(javac) is None:
        why = "needs javac (a JDK) to compile tests/kafka/java/SchemaRoundTrip.java"
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but it {why}", pytrace=False)
        pytest.skip(why)
    subprocess.run([javac, "-cp", kafka_ref.classpath, "-d", str(tmp_path), str(SOURCE)],
                   check=True, timeout=120, capture_output=True)
    done = subprocess.run(
        [kafka_ref.java, "-cp", f"{tmp_path}:{kafka_ref.classpath}", "SchemaRoundTrip"],
        input="".join(f"{name} {version} {body}\n" for name, version, body in lines),
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = done.stdout.splitlines()
    assert len(answers) == len(lines)
    for (name, version, body), answer in zip(lines, answers):
        written, remaining, text = answer.split(" ", 2)
        assert (written, remaining) == (body, "0"), f"{name} v{version}: {text}"


def test_kafka_reads_the_streams_group_schemas_back(kafka_ref, tmp_path):
    lines = []
    for key, version in CASES:
        for kind, load in (("Request", load_request_schema), ("Response", load_response_schema)):
            cls = load(key, version)
            for nulls in (False, True):
                lines.append((f"{_JAVA_NAMES[key]}{kind}Data", version,
                              _encode(_fill(cls, nulls=nulls))))
    _round_trip(kafka_ref, tmp_path, lines)


_RECORD_NAMES = {rec.GROUP_METADATA: "StreamsGroupMetadata",
                 rec.MEMBER_METADATA: "StreamsGroupMemberMetadata",
                 rec.TARGET_ASSIGNMENT_METADATA: "StreamsGroupTargetAssignmentMetadata",
                 rec.TARGET_ASSIGNMENT_MEMBER: "StreamsGroupTargetAssignmentMember",
                 rec.CURRENT_MEMBER_ASSIGNMENT: "StreamsGroupCurrentMemberAssignment",
                 rec.TOPOLOGY: "StreamsGroupTopology"}


def test_kafka_reads_the_streams_group_records_back(kafka_ref, tmp_path):
    """The ``__consumer_offsets`` records of a streams group (two members, one asked to
    revoke, standby tasks, an endpoint and client tags): each key and value read by Kafka
    4.4's ``org.apache.kafka.coordinator.group.generated`` class of its record type."""
    topics = {"words": 2, "app-repartition": 2, "app-changelog": 2}
    coordinator = sg.StreamsGroupCoordinator(sg.StreamsGroupConfig(num_standby_replicas=1),
                                             topics.get, lambda: list(topics))
    topology = sg.Topology(3, (
        sg.Subtopology("0", source_topics=("words",), repartition_sink_topics=("app-repartition",)),
        sg.Subtopology("1", repartition_source_topics=(sg.TopicInfo("app-repartition"),),
                       state_changelog_topics=(sg.TopicInfo("app-changelog", 0, -1, (
                           ("cleanup.policy", "compact"),)),)),
    ))
    for member, epoch, owned in (("m1", 0, ({}, {}, {})), ("m2", 0, ({}, {}, {})),
                                 ("m1", 1, ({"0": {0, 1}, "1": {0, 1}}, {}, {}))):
        result = coordinator.heartbeat(
            group_id="app", member_id=member, member_epoch=epoch, instance_id=None,
            rack_id="r1", rebalance_timeout_ms=30000, topology=topology if epoch == 0 else None,
            owned=owned, process_id=f"p-{member}", user_endpoint=("host", 8080),
            client_tags=[("zone", "a")], task_offsets=None, task_end_offsets=None,
            shutdown_application=False, client_id="c", client_host="/127.0.0.1", now_ms=0)
        assert result.error_code == 0
    records = coordinator.records("app")
    assert {rec.decode_key(k)[0] for k in records} == set(_RECORD_NAMES)
    prefix = "org.apache.kafka.coordinator.group.generated."
    lines = []
    for key, value in records.items():
        name = _RECORD_NAMES[rec.decode_key(key)[0]]
        lines.append((f"{prefix}{name}Key", 0, key[2:].hex()))
        lines.append((f"{prefix}{name}Value", 0, value[2:].hex()))
    _round_trip(kafka_ref, tmp_path, lines)
    # And back: a coordinator loading them describes the same group.
    again = sg.StreamsGroupCoordinator(sg.StreamsGroupConfig(num_standby_replicas=1),
                                       topics.get, lambda: list(topics))
    loaded = [rec.StreamsRecord(*rec.decode_key(k), rec.decode_value(rec.decode_key(k)[0], v))
              for k, v in records.items()]
    assert again.load_records(loaded, 0) == ["app"]
    assert again.records("app") == records
    assert again.describe("app") == coordinator.describe("app")
