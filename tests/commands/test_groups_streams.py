"""``seglog groups`` on a streams group (KIP-1071) of a real Kafka Streams 4.4 app
(tests/streams_app.py's word count, ``group.protocol=streams``), against a seglog broker and
against Kafka 4.4: describe while it runs (members, tasks, the partitions of their active
tasks, committed offsets and lag), reset-offsets and delete refused while it has members,
then, the app stopped, describe, reset-offsets --execute, delete-offsets and delete. The same
steps give the same answers on both brokers.

Skips without java, javac, the Kafka jars or the kafka-streams jar (fails under
``SEGLOG_REQUIRE_KAFKA=1``).
"""

from __future__ import annotations

import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.bench.kafka import KafkaBroker, find_kafka
from seglog.server.broker import Broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from streams_app import (ALL_TASKS, BATCH_1, KAFKA_ONLY_CONFIG, STREAMS_CONFIG,  # noqa: E402
                         App, _counts, _expected, _wait, compile_app)

pytestmark = [pytest.mark.kafka, pytest.mark.clients, pytest.mark.slow]

_REF, _WHY = find_kafka()
GROUP = "wordcount"
REPARTITION = "wordcount-words-repartition"



@pytest.fixture(scope="module")
def app_classes(kafka_ref, tmp_path_factory) -> Path:
    """The compiled word count app's class dir."""
    return compile_app(kafka_ref, tmp_path_factory.mktemp("streams-app"))


def _description(run_seglog, where: list[str]) -> dict[str, Any]:
    ran = run_seglog("groups", "describe", GROUP, *where, "-o", "json")
    assert ran.returncode == 0, ran.stderr
    (described,) = ran.json()["groups"]
    return described


def _shape(d: dict[str, Any]) -> dict[str, Any]:
    """A description without what legitimately differs between brokers and runs (ids,
    epochs, hosts, the coordinator's address)."""
    return dict(
        type=d["type"], state=d["state"], assignor=d["assignor"],
        subtopologies=d["subtopologies"],
        members=[dict(tasks=m["tasks"], partitions=m["partitions"],
                      is_classic=m["is_classic"]) for m in d["members"]],
        offsets=[dict(topic=r["topic"], partition=r["partition"],
                      committed=r["committed_offset"], end=r["log_end_offset"], lag=r["lag"],
                      owned=r["member_id"] is not None) for r in d["offsets"]])


def _running(run_seglog, kafka_ref, classes: Path, bootstrap: str, run_dir: Path
             ) -> dict[str, Any]:
    """The app runs (one instance, all four tasks), is described, refused a reset and a
    delete, and stops."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("words", 2, 1), NewTopic("counts", 1, 1)],
                                      operation_timeout=30).values():
        future.result()
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, line in enumerate(BATCH_1):
        producer.produce("words", key=f"k{i}", value=line, partition=i % 2)
    assert producer.flush(30) == 0
    seen: dict[str, Any] = {}
    app = App(kafka_ref, classes, run_dir / "a", bootstrap, "host-a:7001")
    try:
        _wait("the instance running all four tasks",
              lambda: app.running() and app.tasks() == ALL_TASKS, [app])
        _wait("the first batch counted",
              lambda: _counts(bootstrap) == _expected(BATCH_1), [app], timeout_s=60)
        listed = run_seglog("groups", "list", "--type", "streams", "-b", bootstrap,
                            "-o", "json")
        assert listed.returncode == 0, listed.stderr
        seen["listed"] = [(g["group"], g["type"]) for g in listed.json()["groups"]]

        # the app commits every 200 ms: wait for its commits to reach the log ends
        def caught_up() -> bool:
            d = _description(run_seglog, ["-b", bootstrap])
            rows = [r for r in d["offsets"] if r["topic"] == "words"]
            return d["state"] == "Stable" and len(rows) == 2 and all(
                r["lag"] == 0 for r in rows)
        _wait("the group's commits caught up on words", caught_up, [app], timeout_s=30)
        running = _description(run_seglog, ["-b", bootstrap])
        seen["running"] = _shape(running)
        (member,) = running["members"]
        assert member["process_id"] and member["client_id"] and member["member_id"]
        text = run_seglog("groups", "describe", GROUP, "-b", bootstrap)
        assert text.returncode == 0, text.stderr
        assert "ACTIVE: 0:[0,1]; 1:[0,1];" in text.stdout, text.stdout
        assert "OFFSET-LAG" in text.stdout and "LEADER-EPOCH" in text.stdout
        refused = run_seglog("groups", "reset-offsets", GROUP, "--topic", "words",
                             "--to-earliest", "--execute", "-b", bootstrap)
        seen["reset_running"] = (refused.returncode, "inactive" in refused.stderr)
        refused = run_seglog("groups", "delete", GROUP, "-b", bootstrap)
        seen["delete_running"] = (refused.returncode, "NON_EMPTY_GROUP" in refused.stderr)
    finally:
        app.stop()
    assert "CLOSED" in app.lines, app.lines
    deadline = time.monotonic() + 30
    while _description(run_seglog, ["-b", bootstrap])["state"] != "Empty" \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    return seen


def _stopped(run_seglog, where: list[str]) -> dict[str, Any]:
    """The steps on the stopped app's group, on a broker (``-b HOST:PORT``) or a data dir
    (``--data-dir DIR``)."""
    seen: dict[str, Any] = {}
    seen["stopped"] = _shape(_description(run_seglog, where))
    listed = run_seglog("groups", "list", "--type", "streams", *where, "-o", "json")
    assert listed.returncode == 0, listed.stderr
    seen["listed_stopped"] = [(g["group"], g["type"], g["state"])
                              for g in listed.json()["groups"]]
    text = run_seglog("groups", "describe", GROUP, *where)
    assert text.returncode == 0 and "CURRENT-OFFSET" in text.stdout, text
    dry = run_seglog("groups", "reset-offsets", GROUP, "--topic", "words", "--to-earliest",
                     *where, "-o", "json")
    assert dry.returncode == 0, dry.stderr
    seen["dry_run"] = dry.json()
    inputs = run_seglog("groups", "reset-offsets", GROUP, "--all-topics", "--to-latest",
                        *where, "-o", "json")
    assert inputs.returncode == 0, inputs.stderr
    seen["all_input_topics"] = sorted({r["topic"] for r in inputs.json()["offsets"]})
    outside = run_seglog("groups", "reset-offsets", GROUP, "--topic", "counts",
                         "--to-latest", *where)
    seen["outside_topic"] = (outside.returncode, "not part of the group" in outside.stderr)
    done = run_seglog("groups", "reset-offsets", GROUP, "--topic", "words:1", "--shift-by",
                      "-1", "--execute", *where, "-o", "json")
    assert done.returncode == 0, done.stderr
    seen["reset"] = done.json()
    seen["after_reset"] = [(r["topic"], r["partition"], r["committed_offset"], r["lag"])
                           for r in _description(run_seglog, where)["offsets"]]
    deleted = run_seglog("groups", "delete-offsets", GROUP, "--topic", REPARTITION,
                         *where, "-o", "json")
    seen["delete_offsets"] = (deleted.returncode, deleted.json())
    seen["after_delete_offsets"] = sorted({r["topic"] for r in _description(
        run_seglog, where)["offsets"]})
    gone = run_seglog("groups", "delete", GROUP, "--delete-all-internal-topics", *where,
                      "-o", "json")
    seen["delete"] = (gone.returncode, gone.json())
    topics = run_seglog("topics", "list", *where, "-o", "json")
    assert topics.returncode == 0, topics.stderr
    seen["topics_after_delete"] = sorted(topics.json()["topics"])
    missing = run_seglog("groups", "describe", GROUP, *where)
    seen["describe_deleted"] = missing.returncode
    listed = run_seglog("groups", "list", *where, "-o", "json")
    seen["listed_after_delete"] = [g["group"] for g in listed.json()["groups"]
                                   if g["group"] == GROUP]
    return seen


def _check_running(seen: dict[str, Any]) -> None:
    """What both brokers must answer while the app runs (the comparison of the two is the
    other half)."""
    assert seen["listed"] == [(GROUP, "streams")]
    running = seen["running"]
    assert running["state"] == "Stable" and running["type"] == "streams"
    assert [s["subtopology_id"] for s in running["subtopologies"]] == ["0", "1"]
    (member,) = running["members"]
    assert member["tasks"]["active"] == {"0": [0, 1], "1": [0, 1]}
    assert {(p["topic"], p["partition"]) for p in member["partitions"]} == {
        ("words", 0), ("words", 1), (REPARTITION, 0), (REPARTITION, 1)}
    words = [r for r in running["offsets"] if r["topic"] == "words"]
    assert [(r["partition"], r["committed"], r["end"], r["lag"], r["owned"])
            for r in words] == [(0, 2, 2, 0, True), (1, 1, 1, 0, True)]
    assert seen["reset_running"] == (1, True)
    assert seen["delete_running"] == (1, True)


def _check_stopped(seen: dict[str, Any]) -> None:
    """What a broker and a data dir must answer once the app stopped."""
    assert seen["listed_stopped"] == [(GROUP, "streams", "Empty")]
    stopped = seen["stopped"]
    assert stopped["state"] == "Empty" and stopped["members"] == []
    assert [s["subtopology_id"] for s in stopped["subtopologies"]] == ["0", "1"]
    assert [(r["topic"], r["partition"], r["committed"], r["lag"]) for r in stopped["offsets"]
            if r["topic"] == "words"] == [("words", 0, 2, 0), ("words", 1, 1, 0)]
    assert seen["dry_run"] == {"group": GROUP, "executed": False, "offsets": [
        {"topic": "words", "partition": 0, "previous_offset": 2, "new_offset": 0},
        {"topic": "words", "partition": 1, "previous_offset": 1, "new_offset": 0}]}
    assert seen["all_input_topics"] == ["words"]
    assert seen["outside_topic"] == (3, True)
    assert seen["reset"]["offsets"] == [
        {"topic": "words", "partition": 1, "previous_offset": 1, "new_offset": 0}]
    assert ("words", 0, 2, 0) in seen["after_reset"]
    assert ("words", 1, 0, 1) in seen["after_reset"]
    code, result = seen["delete_offsets"]
    assert code == 0 and {r["error"] for r in result["partitions"]} == {None}
    assert seen["after_delete_offsets"] == ["words"]
    assert seen["delete"] == (0, {"groups": [{"group": GROUP, "error": None,
                                              "internal_topics": [
                                                  "wordcount-counts-changelog",
                                                  REPARTITION]}]})
    assert seen["topics_after_delete"] == ["counts", "words"]
    assert seen["describe_deleted"] == 3
    assert seen["listed_after_delete"] == []


def _without_assignor(seen: dict[str, Any]) -> dict[str, Any]:
    # a data dir has no assignor (it is the broker's config, not in the group's records)
    return {**seen, "stopped": {**seen["stopped"], "assignor": None}}


def test_streams_group_on_seglog_and_kafka(run_seglog, kafka_ref, app_classes, tmp_path):
    config = {"offsets.topic.num.partitions": 1, **STREAMS_CONFIG}
    broker = Broker(tmp_path / "data", listen=("127.0.0.1", 0), config=config)
    broker.start()
    try:
        seglog_running = _running(run_seglog, kafka_ref, app_classes, broker.bootstrap,
                                  tmp_path / "seglog-app")
    finally:
        broker.stop()
    _check_running(seglog_running)
    # the same steps on a copy of the data dir (no broker) and on the broker again, while
    # Kafka runs the app
    shutil.copytree(tmp_path / "data", tmp_path / "copy")

    def on_seglog_again() -> dict[str, Any]:
        broker = Broker(tmp_path / "data", listen=("127.0.0.1", 0), config=config)
        broker.start()
        try:
            return _stopped(run_seglog, ["-b", broker.bootstrap])
        finally:
            broker.stop()

    with ThreadPoolExecutor(2) as pool:
        on_dir_future = pool.submit(_stopped, run_seglog,
                                    ["--data-dir", str(tmp_path / "copy")])
        seglog_future = pool.submit(on_seglog_again)
        kafka = KafkaBroker(kafka_ref, tmp_path / "kafka",
                            extra_properties={**STREAMS_CONFIG, **KAFKA_ONLY_CONFIG})
        kafka.format()
        kafka.start()
        try:
            kafka_running = _running(run_seglog, kafka_ref, app_classes, kafka.bootstrap,
                                     tmp_path / "kafka-app")
            kafka_stopped = _stopped(run_seglog, ["-b", kafka.bootstrap])
        finally:
            kafka.stop()
        on_dir, seglog_stopped = on_dir_future.result(), seglog_future.result()
    _check_stopped(on_dir)
    _check_stopped(seglog_stopped)
    _check_running(kafka_running)
    _check_stopped(kafka_stopped)
    assert seglog_running == kafka_running
    assert seglog_stopped == kafka_stopped
    assert _without_assignor(on_dir) == _without_assignor(kafka_stopped)
