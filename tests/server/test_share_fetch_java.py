"""ShareFetch / ShareAcknowledge on ``seglog serve`` with Kafka 4.4's Java KafkaShareConsumer
(``java/ShareConsumerMember.java``, compiled at test time): two members of one partition get
every record once; a member that RELEASEs each record on its first delivery gets it again with
delivery count 2 and no third time."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.bench.kafka import find_kafka
from seglog.server.share_partitions import find_share_partition_manager

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SOURCE = Path(__file__).resolve().parent / "java" / "ShareConsumerMember.java"
TOPIC = "jq"
WAIT_S = 60.0


@pytest.fixture(scope="module")
def java_member(tmp_path_factory):
    """``(java, classpath)`` to run ``ShareConsumerMember``; skips without a JDK or the
    jars (fails under ``SEGLOG_REQUIRE_KAFKA=1``)."""
    ref, why = find_kafka()
    required = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")
    javac = None
    if ref is not None:
        javac = shutil.which("javac") or str(Path(ref.java).with_name("javac"))
        if not Path(javac).exists():
            javac, why = None, "needs javac (a JDK)"
    if ref is None or javac is None:
        if required:
            pytest.fail(why)
        pytest.skip(why)
    out_dir = tmp_path_factory.mktemp("java")
    subprocess.run([javac, "-cp", ref.classpath, "-d", str(out_dir), str(SOURCE)],
                   check=True, timeout=120, capture_output=True)
    return ref.java, f"{out_dir}:{ref.classpath}"


class Member:
    """One running ShareConsumerMember; ``records()`` are its ``(offset, count)`` lines."""

    def __init__(self, java_member, bootstrap: str, group: str, run_s: int, mode: str):
        java, classpath = java_member
        self.process = subprocess.Popen(
            [java, "-cp", classpath, "ShareConsumerMember", bootstrap, group, TOPIC,
             str(run_s), mode], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(
            line.rstrip() for line in self.process.stdout), daemon=True)
        self._reader.start()

    def records(self) -> list[tuple[int, int]]:
        return [(int(line.split()[2]), int(line.split()[3]))
                for line in list(self.lines) if line.startswith("RECORD")]

    def finish(self) -> None:
        """Stop it (it has done its part) and collect what it printed."""
        try:
            if self.process.poll() is None:
                self.process.terminate()
            self.process.wait(WAIT_S)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(10)


def _initialized(broker, group: str) -> bool:
    manager = find_share_partition_manager(broker.state)
    return manager is not None and any(
        e.group_id == group and e.ready is not None and e.ready.done()
        and e.ready.result() == 0 for e in list(manager.entries.values()))


def _setup(broker_factory):
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    return broker


def _wait_initialized(broker, group: str, members) -> None:
    deadline = time.monotonic() + WAIT_S
    while not _initialized(broker, group):
        assert time.monotonic() < deadline, [m.lines[-5:] for m in members]
        time.sleep(0.2)


def _produce(broker, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(TOPIC, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0


def test_two_java_members_get_every_record_once(broker_factory, java_member):
    broker = _setup(broker_factory)
    members = [Member(java_member, broker.bootstrap, "jg", 60, "accept") for _ in range(2)]
    try:
        _wait_initialized(broker, "jg", members)
        time.sleep(2)  # the second member's first fetch
        _produce(broker, 200)
        deadline = time.monotonic() + WAIT_S
        while sum(len(m.records()) for m in members) < 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # no record a second time
    finally:
        for m in members:
            m.finish()
    offsets = sorted(o for m in members for o, _ in m.records())
    assert offsets == list(range(200))
    assert {c for m in members for _, c in m.records()} == {1}


def test_a_java_member_gets_a_released_record_again_with_count_two(broker_factory,
                                                                    java_member):
    broker = _setup(broker_factory)
    member = Member(java_member, broker.bootstrap, "jr", 60, "release-once")
    try:
        _wait_initialized(broker, "jr", [member])
        _produce(broker, 20)
        deadline = time.monotonic() + WAIT_S
        while len(member.records()) < 40 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # no third delivery comes
    finally:
        member.finish()
    assert sorted(member.records()) == sorted(
        [(o, 1) for o in range(20)] + [(o, 2) for o in range(20)])
