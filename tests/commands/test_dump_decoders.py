"""``seglog dump --offsets-decoder`` / ``--share-group-state-decoder`` against Kafka 4.4's
``kafka-dump-log``: the coordinator records of a KIP-848 consumer group (confluent-kafka with
``group.protocol=consumer``, one member subscribed by name and one by regular expression) and
of a share group (confluent-kafka's ShareConsumer, records acknowledged and committed),
written by a real Kafka 4.4 broker and by a seglog broker, dumped by both tools and compared
line for line. The files are copied first (the coordinators keep appending).
"""

from __future__ import annotations

import shutil
import struct
import time
import uuid
from pathlib import Path

import pytest

from seglog.coordinator.offsets_schema import offsets_partition_for_group

from kafka_waits import group_configs_shown
from test_dump import _assert_same, _both, _files, _kafka, _wait_quiet

RECORDS = 20
ADMIN_TIMEOUT_S = 20


def _make_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(ADMIN_TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, b"v%d" % i, key=b"k%d" % i, partition=i % 2)
    assert producer.flush(ADMIN_TIMEOUT_S) == 0


def _consumer_group(bootstrap: str, topic: str, group: str, pattern: bool) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([f"^{topic}.*" if pattern else topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < RECORDS and time.monotonic() < deadline:
            got += len([m for m in consumer.consume(100, timeout=0.5) if m.error() is None])
        assert got == RECORDS
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _share_group(bootstrap: str, topic: str, group: str) -> None:
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest",
                        incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]).values():
        future.result(ADMIN_TIMEOUT_S)
    # Kafka answers once its controller committed the config; its broker's image (which the
    # share-partitions read when the member joins: else they start at "latest", after the
    # records) applies it a moment later. Wait, bounded, until it shows: both brokers alike.
    group_configs_shown(admin, group, {"share.auto.offset.reset": "earliest"})
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < RECORDS and time.monotonic() < deadline:
            for message in consumer.poll(0.5):
                if message.error() is None:
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                    got += 1
            consumer.commit_sync(ADMIN_TIMEOUT_S)
        assert got == RECORDS
    finally:
        consumer.close()


def _copy_logs(sources: list[Path], into: Path) -> list[str]:
    copies = []
    for source in sources:
        target = into / source.name
        target.mkdir(parents=True, exist_ok=True)
        for log in _files(source, (".log",)):
            shutil.copyfile(log, target / Path(log).name)
            copies.append(str(target / Path(log).name))
    return copies


def _groups_dump_as_kafka_dumps_them(ref, run_seglog, tmp_path: Path, bootstrap: str,
                                     data_dir: Path) -> tuple[str, str]:
    name = f"test_dump_dec_{uuid.uuid4().hex[:8]}"
    _make_topic(bootstrap, name)
    groups = [f"{name}-named", f"{name}-regex", f"{name}-share"]
    _consumer_group(bootstrap, name, groups[0], pattern=False)
    _consumer_group(bootstrap, name, groups[1], pattern=True)
    _share_group(bootstrap, name, groups[2])
    _wait_quiet(data_dir, "__*/*.log")  # the share and group coordinators' last writes
    count = len(list(data_dir.glob("__consumer_offsets-*")))
    offsets = sorted({data_dir / f"__consumer_offsets-{offsets_partition_for_group(g, count)}"
                      for g in groups})
    # every __share_group_state partition that has records (the share-partitions' keys
    # hash over them)
    state = sorted(p for p in data_dir.glob("__share_group_state-*")
                   if any(Path(f).stat().st_size for f in _files(p, (".log",))))
    assert state, "no share-group state was written"
    copies = tmp_path / "copies"
    offsets_logs = _copy_logs(offsets, copies)
    state_logs = _copy_logs(state, copies)
    kafka, ours = _both(ref, run_seglog, offsets_logs, ["--offsets-decoder"], tmp_path)
    _assert_same(kafka, ours, "--offsets-decoder")
    offsets_text = ours.stdout
    kafka, ours = _both(ref, run_seglog, state_logs, ["--share-group-state-decoder"], tmp_path)
    _assert_same(kafka, ours, "--share-group-state-decoder")
    return offsets_text, ours.stdout


def _record_types(text: str) -> set[int]:
    types = set()
    for line in text.splitlines():
        _, found, rest = line.partition('key: {"type":"')
        if found:
            types.add(int(rest.split('"', 1)[0]))
    return types


@pytest.mark.kafka
def test_kafka_written_group_records_decode_as_kafka_decodes_them(kafka_shared, run_seglog,
                                                                  tmp_path):
    """Kafka 4.4's own records of consumer (KIP-848, regex subscriptions too) and share
    groups: every type decoded, none unknown, every line Kafka's."""
    ref = _kafka()
    offsets, state = _groups_dump_as_kafka_dumps_them(ref, run_seglog, tmp_path,
                                                      kafka_shared.bootstrap,
                                                      Path(kafka_shared.data_dir))
    assert "Unknown record type" not in offsets and "Error at offset" not in offsets
    # commits, consumer-group metadata/members/targets/assignments/regex, share groups'
    assert {1, 3, 5, 6, 7, 8, 16, 10, 11, 12, 13, 14, 15} <= _record_types(offsets)
    assert '"subscribedTopicRegex":"(^test_dump_dec_' in offsets
    assert {0} <= _record_types(state) and '"stateBatches":[' in state


@pytest.mark.kafka
def test_seglog_broker_written_group_records_decode_as_kafka_decodes_them(
        seglog_broker_factory, run_seglog, tmp_path):
    """The same groups on a seglog broker: its coordinators' records read by both tools."""
    ref = _kafka()
    data_dir = tmp_path / "seglog-data"
    broker = seglog_broker_factory(data_dir=data_dir)
    offsets, state = _groups_dump_as_kafka_dumps_them(ref, run_seglog, tmp_path,
                                                      broker.bootstrap, data_dir)
    assert "Unknown record type" not in offsets
    assert {1, 3, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15} <= _record_types(offsets)
    assert {0} <= _record_types(state)


# --- every record type, every field: records written from Kafka's schemas ------------------------

def _uvarint(value: int) -> bytes:
    out = bytearray()
    value &= 0xFFFFFFFF
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_FIXED = {"int8": (">b", 5), "int16": (">h", 300), "uint16": (">H", 65000),
          "int32": (">i", 123456), "int64": (">q", (1 << 40) + 5), "float64": (">d", 1.5)}


class _Encoder:
    """Kafka's wire encoding of a coordinator message from its schema, every field set:
    ``full`` gives every field a value that is not its default (tagged fields included),
    else nullable fields are null and tagged fields are absent."""

    def __init__(self, schema: dict, full: bool) -> None:
        self.structs = {s["name"]: s["fields"] for s in schema.get("commonStructs", ())}
        self.full = full

    def version_in(self, spec, version: int) -> bool:
        if spec is None or spec == "none":
            return False
        if spec.endswith("+"):
            return version >= int(spec[:-1])
        low, _, high = spec.partition("-")
        return int(low) <= version <= int(high or low)

    def length(self, n: int, flexible: bool, long_form: bool) -> bytes:
        if flexible:
            return _uvarint(n + 1)
        return struct.pack(">i" if long_form else ">h", n)

    def value(self, field: dict, kind: str, version: int, flexible: bool, tagged=False) -> bytes:
        null = not self.full and self.version_in(field.get("nullableVersions"), version)
        if kind.startswith("[]"):
            if null:
                return self.length(-1, flexible, True)
            item = {k: v for k, v in field.items() if k != "nullableVersions"}
            return self.length(2, flexible, True) + b"".join(
                self.value(item, kind[2:], version, flexible) for _ in range(2))
        if kind in _FIXED:
            code, number = _FIXED[kind]
            return struct.pack(code, number)
        if kind == "bool":
            return b"\x01"
        if kind == "uuid":
            return uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").bytes
        if kind in ("string", "bytes"):
            if null:
                return self.length(-1, flexible, kind == "bytes")
            data = f"{field['name']}-é".encode() if kind == "string" else b"\x00\xffab"
            return self.length(len(data), flexible, kind == "bytes") + data
        if self.version_in(field.get("nullableVersions"), version):
            if null:
                return _uvarint(0) if tagged else b"\xff"
            prefix = _uvarint(1) if tagged else b"\x01"
        else:
            prefix = b""
        fields = field.get("fields") or self.structs[kind]
        return prefix + self.message(fields, version, flexible)

    def message(self, fields: list, version: int, flexible: bool, key=False) -> bytes:
        out = b""
        tagged = []
        for field in fields:
            if not key and not self.version_in(field["versions"], version):
                continue
            if flexible and self.version_in(field.get("taggedVersions"), version):
                tagged.append(field)
                continue
            out += self.value(field, field["type"], version, flexible)
        if flexible:
            present = tagged if self.full else []
            out += _uvarint(len(present))
            for field in sorted(present, key=lambda f: f["tag"]):
                data = self.value(field, field["type"], version, True, tagged=True)
                out += _uvarint(field["tag"]) + _uvarint(len(data)) + data
        return out


def _schema_records(share_state: bool) -> list[tuple[bytes, bytes | None]]:
    from seglog.commands.coordinator_messages import MESSAGES

    records = []
    for name, key_schema in MESSAGES.items():
        if key_schema["type"] != "coordinator-key":
            continue
        base = name[:-len("Key")]
        if (base in ("ShareSnapshot", "ShareUpdate")) != share_state:
            continue
        value_schema = MESSAGES[base + "Value"]
        record_type = key_schema["apiKey"]
        key = struct.pack(">h", record_type) + _Encoder(key_schema, True).message(
            key_schema["fields"], 0, False, key=True)
        low, _, high = value_schema["validVersions"].partition("-")
        for version in range(int(low), int(high or low) + 1):
            for full in (True, False):
                encoder = _Encoder(value_schema, full)
                flexible = encoder.version_in(value_schema["flexibleVersions"], version)
                records.append((key, struct.pack(">h", version) + encoder.message(
                    value_schema["fields"], version, flexible)))
        records.append((key, None))  # a tombstone
        records.append((key, struct.pack(">h", 99)))  # a value version Kafka does not know
        records.append((key, records[-3][1][:-3]))  # a truncated value
    records.append((struct.pack(">h", 99) + b"\x00\x01g", b"\x00\x00"))  # an unknown type
    records.append((b"\x00", b"\x00\x00"))  # a key too short for its type
    return records


@pytest.mark.kafka
@pytest.mark.parametrize("share_state", [False, True], ids=["offsets", "share-group-state"])
def test_every_record_type_decodes_as_kafka_decodes_it(share_state, run_seglog, tmp_path):
    """Every record type of Kafka 4.4's group coordinator (classic, consumer, share and
    streams groups) or share coordinator, at every value version, with every field set to a
    value that is not its default (tagged fields, nested structs, bytes, uint16) and with
    nullable fields null; tombstones, unknown types and versions, truncated values: both
    tools print the same lines."""
    import seglog
    from seglog.storage.config import LogConfig

    ref = _kafka()
    records = _schema_records(share_state)
    with seglog.Log.open(tmp_path / "coordinator-0", LogConfig()) as log:
        for key, value in records:
            log.append_batch([value], [key], [1_700_000_000_000])
    flag = "--share-group-state-decoder" if share_state else "--offsets-decoder"
    logs = _files(tmp_path / "coordinator-0", (".log",))
    kafka, ours = _both(ref, run_seglog, logs, [flag], tmp_path)
    _assert_same(kafka, ours, flag)
    assert ours.stdout.count("Error at offset") >= 2 * (len(records) - 2) // 7
