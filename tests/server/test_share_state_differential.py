"""Differential: InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
DeleteShareGroupState, ReadShareGroupStateSummary (83-87) and FindCoordinator key type 2, the
same requests (kio over a socket) to the real Kafka 4.4 broker and to seglog serve, and the same
answers back: error codes, messages, state, epochs, batches (the topic ids are each broker's
own and are compared as the topic they name)."""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from kio.static.primitive import i16, i32

from seglog.bench.kafka import KafkaBroker, find_kafka
from seglog.coordinator.share_state_records import SHARE_STATE_TOPIC, coordinator_key

from share_state_wire import (_module, call, delete, find_share_coordinator, initialize,
                              partition_answer,
                              plain, read, read_many, summary, write)

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_REF, _WHY = find_kafka()
SHARE = {"share.coordinator.state.topic.num.partitions": 1,
         "share.coordinator.state.topic.replication.factor": 1,
         "share.coordinator.state.topic.min.isr": 1,
         # Snapshots every 3 updates, so the conversation writes several of each.
         "share.coordinator.snapshot.update.records.per.snapshot": 3}
WAIT_S = 60.0
_SETTLING = {14, 15, 16}  # load in progress, coordinator not available, not coordinator


@pytest.fixture(scope="module")
def real_kafka(tmp_path_factory):
    if _REF is None:
        import os
        if os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0"):
            pytest.fail(f"SEGLOG_REQUIRE_KAFKA=1 but {_WHY}", pytrace=False)
        pytest.skip(_WHY)
    kafka = KafkaBroker(_REF, tmp_path_factory.mktemp("kafka"), extra_properties=SHARE)
    kafka.format()
    kafka.start()
    try:
        yield kafka
    finally:
        kafka.stop()


def _address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def _create_topic(address, name: str, partitions: int) -> uuid.UUID:
    m = _module(19, 7)
    answer = call(address, m.CreateTopicsRequest(
        topics=(m.CreatableTopic(name=name, num_partitions=i32(partitions),
                                 replication_factor=i16(1), assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=30), validate_only=False))
    topic = answer.topics[0]
    assert topic.error_code == 0, topic
    return topic.topic_id


def _settled(address, make, topic_id):
    """The first answer that is not a coordinator still settling (bounded)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = call(address, make(topic_id))
        codes_ = [p.error_code for r in answer.results for p in r.partitions]
        if not set(codes_) & _SETTLING or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def _find(address, key):
    deadline = time.monotonic() + WAIT_S
    while True:
        found = call(address, find_share_coordinator(key)).coordinators[0]
        if found.error_code != 15 or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


#: ``(name, request maker(topic id, other topic id))``: the conversation, in order.
def _steps():
    unknown = uuid.UUID("6f0d1c2b-0000-4000-8000-00000000abcd")
    return [
        ("read-uninitialized", lambda t: read("g", t, 0, 0)),
        ("write-uninitialized", lambda t: write("g", t, 0, state_epoch=0, leader_epoch=0,
                                                start_offset=0)),
        ("summary-uninitialized-v0", lambda t: summary("g", t, 0, version=0)),
        ("summary-uninitialized-v1", lambda t: summary("g", t, 0)),
        ("delete-uninitialized", lambda t: delete("g", t, 0)),
        ("initialize", lambda t: initialize("g", t, 0, 1, 10)),
        ("read-epoch-3", lambda t: read("g", t, 0, 3)),
        ("write-v1", lambda t: write("g", t, 0, state_epoch=1, leader_epoch=3, start_offset=10,
                                     batches=[(10, 14, 2, 1), (15, 19, 0, 1)],
                                     delivery_complete_count=5)),
        ("write-v0-overlap", lambda t: write("g", t, 0, state_epoch=1, leader_epoch=3,
                                             start_offset=12, batches=[(13, 16, 4, 2)],
                                             version=0)),
        ("read-after-writes", lambda t: read("g", t, 0, 3)),
        ("summary-v0", lambda t: summary("g", t, 0, version=0)),
        ("summary-v1", lambda t: summary("g", t, 0)),
        ("write-older-start", lambda t: write("g", t, 0, state_epoch=1, leader_epoch=3,
                                              start_offset=11, batches=[(11, 11, 2, 1)],
                                              delivery_complete_count=9)),
        ("read-older-start", lambda t: read("g", t, 0, 3)),
        ("summary-older-start", lambda t: summary("g", t, 0)),
        ("write-fenced-leader", lambda t: write("g", t, 0, state_epoch=1, leader_epoch=2,
                                                start_offset=10)),
        ("write-fenced-state", lambda t: write("g", t, 0, state_epoch=0, leader_epoch=3,
                                               start_offset=10)),
        ("initialize-fenced", lambda t: initialize("g", t, 0, 0, 10)),
        ("read-fenced", lambda t: read("g", t, 0, 1)),
        ("read-newer-epoch", lambda t: read("g", t, 0, 7)),
        ("summary-newer-epoch", lambda t: summary("g", t, 0, 1)),
        ("read-negative-leader", lambda t: read("g", t, 0, -1)),
        ("write-negative-leader", lambda t: write("g", t, 0, state_epoch=1, leader_epoch=-1,
                                                  start_offset=10)),
        ("write-negative-state", lambda t: write("g", t, 0, state_epoch=-1, leader_epoch=7,
                                                 start_offset=10)),
        ("initialize-negative-state", lambda t: initialize("g", t, 0, -1, 10)),
        ("read-unknown-topic", lambda t: read("g", unknown, 0, 0)),
        ("initialize-unknown-topic", lambda t: initialize("g", unknown, 0, 0, 0)),
        ("summary-unknown-topic", lambda t: summary("g", unknown, 0)),
        ("delete-unknown-topic", lambda t: delete("g", unknown, 0)),
        ("initialize-past-partitions", lambda t: initialize("g", t, 5, 0, 0)),
        ("read-zero-topic-id", lambda t: read("g", uuid.UUID(int=0), 0, 0)),
        ("initialize-zero-topic-id", lambda t: initialize("g", uuid.UUID(int=0), 0, 0, 0)),
        ("write-zero-topic-id", lambda t: write("g", uuid.UUID(int=0), 0, state_epoch=0,
                                                leader_epoch=0, start_offset=0)),
        ("summary-zero-topic-id", lambda t: summary("g", uuid.UUID(int=0), 0)),
        ("delete-zero-topic-id", lambda t: delete("g", uuid.UUID(int=0), 0)),
        ("initialize-negative-partition", lambda t: initialize("g", t, -1, 0, 0)),
        ("read-negative-partition", lambda t: read("g", t, -1, 0)),
        ("summary-negative-partition", lambda t: summary("g", t, -1)),
        ("delete-negative-partition", lambda t: delete("g", t, -1)),
        ("initialize-unset-start", lambda t: initialize("g2", t, 1, 0, -1)),
        ("summary-unset-start", lambda t: summary("g2", t, 1)),
        ("read-unset-start", lambda t: read("g2", t, 1, 0)),
        ("reinitialize-newer-epoch", lambda t: initialize("g", t, 0, 2, 30)),
        ("read-reinitialized", lambda t: read("g", t, 0, 7)),
        ("empty-group", lambda t: read("", t, 0, 0)),
        ("read-many", lambda t: read_many("g", [(t, [(0, 7), (1, 0), (0, 7)]),
                                               (unknown, [(0, 0)]), (t, [(1, 0)])])),
        ("read-many-empty-partitions", lambda t: read_many("g", [(t, [(0, 7)]),
                                                                (unknown, [])])),
        ("delete", lambda t: delete("g", t, 0)),
        ("read-deleted", lambda t: read("g", t, 0, 7)),
        ("summary-deleted", lambda t: summary("g", t, 0)),
        ("delete-again", lambda t: delete("g", t, 0)),
        ("initialize-after-delete", lambda t: initialize("g", t, 0, 0, 3)),
        ("read-after-delete", lambda t: read("g", t, 0, 0)),
        # A batch whose first offset is above its last (Kafka keeps a lone one as sent and
        # fails with UNKNOWN_SERVER_ERROR where its combiner's sweep meets it).
        ("write-inverted", lambda t: write("g", t, 0, state_epoch=0, leader_epoch=0,
                                           start_offset=3, batches=[(10, 5, 2, 1)])),
        ("read-inverted", lambda t: read("g", t, 0, 0)),
        ("write-inverted-merge*", lambda t: write("g", t, 0, state_epoch=0, leader_epoch=0,
                                                  start_offset=3,
                                                  batches=[(10, 5, 2, 1), (3, 4, 0, 1)])),
        ("read-after-failed-merge", lambda t: read("g", t, 0, 0)),
        ("write-covering", lambda t: write("g", t, 0, state_epoch=0, leader_epoch=0,
                                           start_offset=3, batches=[(3, 20, 2, 1)])),
        ("read-covering", lambda t: read("g", t, 0, 0)),
    ]


def _normalize(answer, topic_id):
    text = plain(answer)
    for result in text.get("results", []):
        if result.get("topic_id") == str(topic_id):
            result["topic_id"] = "<topic>"
    if "results" in text:
        text["results"] = sorted(text["results"], key=repr)  # sorted again, as named now
    return text


def test_before_find_coordinator_as_kafka(real_kafka, broker_factory):
    """Before any FindCoordinator made ``__share_group_state`` (this runs first in the
    module): NOT_COORDINATOR from both, with Kafka's message."""
    seglog_broker = broker_factory(config=SHARE)
    seen = {}
    for name, bootstrap in (("kafka", real_kafka.bootstrap),
                            ("seglog", seglog_broker.bootstrap)):
        address = _address(bootstrap)
        topic_id = _create_topic(address, "before-find", 1)
        seen[name] = [_normalize(call(address, make(topic_id)), topic_id) for make in (
            lambda t: initialize("g", t, 0, 0, 0), lambda t: read("g", t, 0, 0),
            lambda t: summary("g", t, 0))]
    assert seen["seglog"] == seen["kafka"]
    assert seen["kafka"][0]["results"][0]["partitions"][0]["error_code"] == 16


def _state_records(path, topic_id, copy):
    """``[(type, group, partition, value without timestamps or None)]`` of the records of
    ``topic_id``'s share-partitions in the ``__share_group_state`` partition at ``path``."""
    import dataclasses
    import shutil

    import seglog
    from seglog.coordinator import share_state_records as records

    shutil.copytree(path, copy)
    out = []
    with seglog.Log.open(copy, read_only=True) as log:
        for r in log.records(log.start_offset):
            key = records.decode_key(bytes(r.key))
            if key.topic_id != topic_id:
                continue
            value = None if r.value is None else records.decode_value(key.record_type,
                                                                      bytes(r.value))
            if isinstance(value, records.ShareSnapshotValue):
                value = dataclasses.replace(value, create_timestamp_ms=0, write_timestamp_ms=0)
            out.append((key.record_type, key.group_id, key.partition, value))
    return out


def test_share_state_conversation_as_kafka(real_kafka, broker_factory, tmp_path):
    seglog_broker = broker_factory(config=SHARE)
    brokers = {"kafka": _address(real_kafka.bootstrap),
               "seglog": _address(seglog_broker.bootstrap)}
    topics = {name: _create_topic(address, f"share-state-{int(time.time())}", 2)
              for name, address in brokers.items()}
    # FindCoordinator key type 2: both name themselves once the topic is there.
    for name, address in brokers.items():
        found = _find(address, coordinator_key("g", topics[name], 0))
        assert (found.error_code, found.error_message) == (0, ""), (name, found)
    answers: dict[str, list] = {name: [] for name in brokers}
    for name, address in brokers.items():
        first = True
        for step, make in _steps():
            if first:
                answer = _settled(address, make, topics[name])
                first = False
            else:
                answer = call(address, make(topics[name]))
            normalized = _normalize(answer, topics[name])
            if step.endswith("*"):
                # The error code only: Kafka's message is a Java NullPointerException's text.
                normalized = [p["error_code"] for r in normalized["results"]
                              for p in r["partitions"]]
            answers[name].append((step, normalized))
    # The records both wrote for it: the same types, epochs, offsets and batches in the same
    # order (snapshots after the same updates); only the timestamps are each broker's own.
    written = {"kafka": _state_records(real_kafka.data_dir / f"{SHARE_STATE_TOPIC}-0",
                                       topics["kafka"], tmp_path / "kafka-copy"),
               "seglog": _state_records(seglog_broker.store.topic(SHARE_STATE_TOPIC).log(0)
                                        .dir_path, topics["seglog"], tmp_path / "seglog-copy")}
    assert written["seglog"] == written["kafka"]
    assert [t for t, *_ in written["kafka"]].count(0) >= 4
    differences = [f"{step}:\n  seglog {seglog_answer}\n  kafka  {kafka_answer}"
                   for (step, kafka_answer), (_step, seglog_answer)
                   in zip(answers["kafka"], answers["seglog"]) if seglog_answer != kafka_answer]
    print("\n".join(differences))
    assert not differences, "\n".join(differences)


def test_find_coordinator_share_keys_as_kafka(real_kafka, broker_factory):
    seglog_broker = broker_factory(config=SHARE)
    brokers = {"kafka": _address(real_kafka.bootstrap),
               "seglog": _address(seglog_broker.bootstrap)}
    tid = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    good = coordinator_key("g", tid, 0)
    keys = ["no-colons", "g:not-a-uuid:0", "g:" + good.split(":")[1] + ":x",
            " :" + good.split(":")[1] + ":0", good + ":", "a:b:" + good]
    v5 = _module(10, 5)
    for name, address in brokers.items():
        _find(address, good)  # the topic made, the coordinator known
    seen = {}
    for name, address in brokers.items():
        rows = []
        for key in keys:
            found = call(address, find_share_coordinator(key)).coordinators[0]
            rows.append((key, found.error_code, found.error_message, found.node_id >= 0))
        old = call(address, v5.FindCoordinatorRequest(key_type=2, coordinator_keys=(good,)))
        rows.append(("v5", old.coordinators[0].error_code, old.coordinators[0].error_message))
        seen[name] = rows
    assert seen["seglog"] == seen["kafka"]


def test_seglog_loads_kafkas_records_to_kafkas_state(real_kafka, tmp_path):
    """The records Kafka 4.4's share coordinator wrote in this module's conversations
    (snapshots, updates, tombstones, leader-epoch updates), replayed by seglog's loader, give
    the state Kafka answers: start offset, epochs, delivery-complete count and batches."""
    import shutil

    import seglog

    copy = tmp_path / f"{SHARE_STATE_TOPIC}-0"
    shutil.copytree(real_kafka.data_dir / f"{SHARE_STATE_TOPIC}-0", copy)
    with seglog.Log.open(copy, read_only=True) as kafka_log:
        items = [(r.offset, r.key, r.value) for r in kafka_log.records(kafka_log.start_offset)]
    assert items, "Kafka wrote no share state here"
    with seglog.Store(tmp_path / "store", offsets_topic_partitions=1) as store:
        share = store.share_coordinator()
        share.set_topic_partition_count(lambda _topic_id: 100)
        share.load(0, items)
        keys = share.share_partitions()
        assert keys
        address = _address(real_kafka.bootstrap)
        for group_id, topic_id, partition in keys:
            ours = share.read_state_summary(group_id, topic_id, partition)
            theirs = partition_answer(call(address, summary(group_id, topic_id, partition)))
            assert (ours.start_offset, ours.state_epoch, ours.leader_epoch,
                    ours.delivery_complete_count) == (
                theirs["start_offset"], theirs["state_epoch"], theirs["leader_epoch"],
                theirs["delivery_complete_count"]), (group_id, partition)
            code, state = share.read_state(group_id, topic_id, partition, ours.leader_epoch)
            theirs = partition_answer(call(address, read(group_id, topic_id, partition,
                                                         ours.leader_epoch)))
            assert code == theirs["error_code"] == 0
            assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in state.batches] == [
                (b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
                for b in theirs["state_batches"]], (group_id, partition)
