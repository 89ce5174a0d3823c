"""The share-group DLQ writer (:mod:`seglog.server.share_dlq`, KIP-1191) against a running
broker: records produced by a real client, DLQ records read back from the broker's log and
by a real consumer, compared byte for byte with what Kafka 4.4 writes (headers, key, value,
partition); the DLQ topic's checks and creation; exactly once across a broker restart."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog import errors
from seglog.server.share_dlq import (
    CLIENT_REJECT, DELIVERY_COUNT_EXCEEDED, PROGRESS_FILE, ShareDlqManager, dlq_headers,
    record_size_bytes,
)
from seglog.types import TopicPartition

from core_helpers import run_on_broker_loop

GROUP = "g1"


def _groups(topic: str = "dlq.g1", copy: str = "true"):
    """Group configs as groupcfg's module gives them: ``g1`` with a DLQ topic."""
    configs = {GROUP: {"errors.deadletterqueue.topic.name": topic,
                       "errors.deadletterqueue.copy.record.enable": copy}}
    return lambda group_id, name: configs.get(group_id, {}).get(name)


def _produce(bootstrap: str, topic: str, partitions: int, partition: int, count: int,
             configs: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=partition,
                         headers=[("h1", b"x")])
    assert producer.flush(10) == 0


def _dlq_records(broker, topic: str, partition: int = 0):
    return list(broker.store.topic(topic).log(partition).records())


def _manager(broker, **kwargs) -> ShareDlqManager:
    return ShareDlqManager(broker.state, **kwargs)


def _enqueue(broker, manager, first, last, *, topic="src", partition=2, count=1,
             cause=CLIENT_REJECT):
    return run_on_broker_loop(broker, manager.enqueue(
        GROUP, TopicPartition(topic, partition), uuid.uuid4(), first, last, count, cause))


def test_headers_are_kafkas():
    # What Kafka 4.4 wrote for a REJECT of src-2 offset 0 (read back from a real broker).
    assert dlq_headers("src", 2, 0, "g1", 1, CLIENT_REJECT) == (
        ("__dlq.errors.topic", b"src"), ("__dlq.errors.partition", b"2"),
        ("__dlq.errors.offset", b"0"), ("__dlq.errors.group", b"g1"),
        ("__dlq.errors.delivery.count", b"1"),
        ("__dlq.errors.message", b"Offset rejected by client."))
    assert dlq_headers("t", 0, 7, "g", 5, DELIVERY_COUNT_EXCEEDED)[-1] == (
        "__dlq.errors.message", b"Offset delivery count exceeded the threshold.")
    assert len(dlq_headers("t", 0, 7, "g", None, None)) == 4


def test_record_size_is_kafkas_default_record_size():
    # DefaultRecord.sizeInBytes(0, 0, null, null, []): length, attributes, two deltas, two
    # null lengths, header count, one byte each.
    assert record_size_bytes(0, 0, None, None, ()) == 7
    # The size of a record as the encoder writes it: a one-record batch less its header.
    from seglog.pure.codec import encode_batch
    for key, value, headers in [(b"k", b"v", [("h", b"x")]), (None, b"x" * 300, []),
                                (b"k" * 70, None, list(dlq_headers("s", 1, 9, "g", 3,
                                                                   CLIENT_REJECT)))]:
        batch = encode_batch([value], [key], 1000, [headers])
        assert record_size_bytes(0, 0, key, value, headers) == len(batch) - 61


def test_rejected_records_copied_with_kafkas_headers(broker_factory):
    broker = broker_factory(errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 4)
    manager = _manager(broker, group_config=_groups())
    result = _enqueue(broker, manager, 0, 0)
    assert (result.written, result.copied, result.dlq_tp) == (1, 1, TopicPartition("dlq.g1", 0))
    _enqueue(broker, manager, 2, 2)
    # The topic as Kafka's createTopicBuilder makes it: num.partitions, the two configs.
    topic = broker.store.topic("dlq.g1")
    assert topic.partitions == 1
    assert topic.config.errors_deadletterqueue_group_enable
    assert topic.config.message_timestamp_type == "CreateTime"
    records = _dlq_records(broker, "dlq.g1")
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
        (0, b"k0", b"v0", dlq_headers("src", 2, 0, GROUP, 1, CLIENT_REJECT)),
        (1, b"k2", b"v2", dlq_headers("src", 2, 2, GROUP, 1, CLIENT_REJECT))]
    # A real consumer reads the same (headers in Kafka's order, the source's own "h1" not
    # copied).
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["dlq.g1"])
        seen = []
        for _ in range(30):
            m = consumer.poll(1.0)
            if m is not None and not m.error():
                seen.append((m.partition(), m.key(), m.value(), m.headers()))
            if len(seen) == 2:
                break
    finally:
        consumer.close()
    assert seen[0] == (0, b"k0", b"v0", [
        ("__dlq.errors.topic", b"src"), ("__dlq.errors.partition", b"2"),
        ("__dlq.errors.offset", b"0"), ("__dlq.errors.group", b"g1"),
        ("__dlq.errors.delivery.count", b"1"),
        ("__dlq.errors.message", b"Offset rejected by client.")])


def test_headers_only_without_copy_record_and_partition_modulo(broker_factory):
    broker = broker_factory(errors_deadletterqueue_auto_create_topics_enable="true",
                            num_partitions=2)
    _produce(broker.bootstrap, "src", 3, 1, 3)
    manager = _manager(broker, group_config=_groups(copy="false"))
    result = _enqueue(broker, manager, 0, 2, partition=1, count=5,
                      cause=DELIVERY_COUNT_EXCEEDED)
    assert (result.written, result.copied, result.dlq_tp.partition) == (3, 0, 1)
    records = _dlq_records(broker, "dlq.g1", 1)
    assert [(r.key, r.value) for r in records] == [(None, None)] * 3
    assert [r.headers for r in records] == [
        dlq_headers("src", 1, o, GROUP, 5, DELIVERY_COUNT_EXCEEDED) for o in range(3)]


def test_batches_stay_within_max_message_bytes(broker_factory):
    broker = broker_factory(errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 6)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("dlq.g1", 1, 1, config={
        "errors.deadletterqueue.group.enable": "true",
        "max.message.bytes": "500"})])["dlq.g1"].result(10)
    manager = _manager(broker, group_config=_groups())
    result = _enqueue(broker, manager, 0, 5)
    assert result.written == 6
    buffer = broker.store.topic("dlq.g1").log(0).read(0, 1 << 20).buffer.tobytes()
    sizes = []
    while buffer:
        size = 12 + int.from_bytes(buffer[8:12], "big")
        sizes.append(size)
        buffer = buffer[size:]
    # Each record is 182 bytes with its headers: 61 + 2 * 182 <= 500 < 61 + 3 * 182.
    assert sizes == [61 + 2 * 182] * 3, sizes
    records = _dlq_records(broker, "dlq.g1")
    assert [r.value for r in records] == [b"v%d" % i for i in range(6)]


def test_concurrent_enqueues_create_the_topic_once(broker_factory):
    # The batches of one acknowledgement are enqueued together (the share fetch path spawns
    # one task each): one creates the topic, the other waits for it.
    import asyncio
    broker = broker_factory(errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 4)
    manager = _manager(broker, group_config=_groups())
    tp = TopicPartition("src", 2)

    async def both():
        return await asyncio.gather(*(
            manager.enqueue(GROUP, tp, None, o, o, 1, CLIENT_REJECT) for o in (0, 2)))

    results = run_on_broker_loop(broker, both())
    assert [r.written for r in results] == [1, 1]
    assert sorted(dict(r.headers)["__dlq.errors.offset"]
                  for r in _dlq_records(broker, "dlq.g1")) == [b"0", b"2"]


def test_dlq_enabled_follows_the_group_config_and_share_version(broker):
    # Kafka's isDLQEnabledForGroup: share.version >= 2 and a DLQ topic named by the group.
    from seglog.server import share_dlq
    assert not share_dlq.dlq_enabled(broker.state, GROUP)  # no group configs: no DLQ
    manager = _manager(broker, group_config=_groups())
    epoch, levels = broker.server.finalized_features
    broker.server.set_finalized_features(epoch + 1, {**levels, "share.version": 2})
    assert manager.dlq_enabled(GROUP) and not manager.dlq_enabled("other")
    broker.server.set_finalized_features(epoch + 2, {**levels, "share.version": 1})
    assert not manager.dlq_enabled(GROUP)


@pytest.mark.parametrize("dlq_topic, configs, broker_config, message", [
    ("", None, {}, "Configured DLQ topic name in share group: g1 is empty."),
    ("__dlq", None, {}, "Configured DLQ topic name in share group: g1 cannot start with __, "
                        "topic: __dlq."),
    ("dlq.g1", None, {}, "DLQ topic does not exist and auto create is disabled on cluster for "
                         "share group: g1, topic: dlq.g1."),
    ("dlq.g1", {}, {}, "DLQ is not enabled on configured DLQ topic for share group: g1, topic: "
                       "dlq.g1."),
    ("other", {"errors.deadletterqueue.group.enable": "true"}, {},
     "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: g1, "
     "topic: other, prefix: dlq.."),
])
def test_dlq_topic_refusals_are_kafkas(broker_factory, dlq_topic, configs, broker_config,
                                        message):
    broker = broker_factory(config=broker_config)
    _produce(broker.bootstrap, "src", 3, 2, 1)
    if configs is not None:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(dlq_topic, 1, 1, config=configs)])[dlq_topic].result(10)
    manager = _manager(broker, group_config=_groups(topic=dlq_topic))
    with pytest.raises(errors.InvalidConfigError) as raised:
        _enqueue(broker, manager, 0, 0)
    assert str(raised.value) == message


def test_empty_prefix_allows_any_name(broker_factory):
    broker = broker_factory(errors_deadletterqueue_topic_name_prefix="",
                            errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 1)
    manager = _manager(broker, group_config=_groups(topic="anything"))
    assert _enqueue(broker, manager, 0, 0).written == 1


def test_bad_parameters_are_refused_in_kafkas_words(broker):
    manager = _manager(broker, group_config=_groups())
    with pytest.raises(errors.InvalidArgumentError,
                       match="last offset cannot be less than first offset"):
        _enqueue(broker, manager, 5, 4)
    with pytest.raises(errors.InvalidArgumentError, match="first offset cannot be negative"):
        _enqueue(broker, manager, -1, 4)


def test_missing_source_records_are_written_headers_only(broker_factory):
    broker = broker_factory(errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 2)
    manager = _manager(broker, group_config=_groups())
    # Offset 5 is past the log end: Kafka's fetcher finds no record for it.
    result = _enqueue(broker, manager, 1, 3)
    assert (result.written, result.copied) == (3, 1)
    assert [(r.key, r.value) for r in _dlq_records(broker, "dlq.g1")] == [
        (b"k1", b"v1"), (None, None), (None, None)]


def test_a_restart_in_the_middle_writes_each_offset_once(broker_factory, tmp_path):
    data_dir = tmp_path / "data"
    broker = broker_factory(data_dir=data_dir,
                            errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 4)
    topic_id = uuid.uuid4()
    tp = TopicPartition("src", 2)
    manager = _manager(broker, group_config=_groups())
    # The broker wrote offsets 0-1 of the range 0-3 and stopped before the rest (and before
    # the ARCHIVED state was persisted): the exactly-once record covers the range.
    run_on_broker_loop(broker, manager.enqueue(GROUP, tp, topic_id, 0, 1, 1, CLIENT_REJECT))
    assert (data_dir / PROGRESS_FILE).exists()
    broker.stop()
    broker = broker_factory(data_dir=data_dir,
                            errors_deadletterqueue_auto_create_topics_enable="true")
    manager = _manager(broker, group_config=_groups())
    # The share partition loads ARCHIVING 0-3 and enqueues it again (maybeResumeDlqArchiving).
    result = run_on_broker_loop(broker, manager.enqueue(GROUP, tp, topic_id, 0, 3, 1,
                                                        CLIENT_REJECT))
    assert (result.written, result.already_written) == (2, 2)
    offsets = [dict(r.headers)["__dlq.errors.offset"] for r in _dlq_records(broker, "dlq.g1")]
    assert offsets == [b"0", b"1", b"2", b"3"]
    # Once ARCHIVED is persisted the record goes; a later range is written in full.
    run_on_broker_loop(broker, manager.forget(GROUP, tp, topic_id, 0, 3))
    assert manager.pending_ranges() == []


def test_a_restart_before_any_write_loses_nothing(broker_factory, tmp_path):
    data_dir = tmp_path / "data"
    broker = broker_factory(data_dir=data_dir,
                            errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 3)
    topic_id = uuid.uuid4()
    tp = TopicPartition("src", 2)
    manager = _manager(broker, group_config=_groups())
    run_on_broker_loop(broker, manager.enqueue(GROUP, tp, topic_id, 0, 0, 1, CLIENT_REJECT))
    broker.stop()
    broker = broker_factory(data_dir=data_dir,
                            errors_deadletterqueue_auto_create_topics_enable="true")
    manager = _manager(broker, group_config=_groups())
    # Another group's records and another partition's in the DLQ do not count as written.
    other = run_on_broker_loop(broker, manager.enqueue(
        GROUP, TopicPartition("src", 1), uuid.uuid4(), 0, 0, 1, CLIENT_REJECT))
    assert other.written == 1
    result = run_on_broker_loop(broker, manager.enqueue(GROUP, tp, topic_id, 0, 2, 1,
                                                        CLIENT_REJECT))
    assert (result.written, result.already_written) == (2, 1)
    assert len(_dlq_records(broker, "dlq.g1")) == 4


# --- with the share partition (seglog.coordinator.share_partition) --------------------------


def _share_partition_module():
    return pytest.importorskip("seglog.coordinator.share_partition")


def _fetched_batches(sp_module, log):
    """The source log's batches as the share fetch path hands them to ``acquire``."""
    buffer = log.read(0, 1 << 20).buffer.tobytes()
    batches = []
    while buffer:
        size = 12 + int.from_bytes(buffer[8:12], "big")
        base = int.from_bytes(buffer[0:8], "big")
        last_delta = int.from_bytes(buffer[23:27], "big")
        producer_id = int.from_bytes(buffer[43:51], "big", signed=True)
        attributes = int.from_bytes(buffer[21:23], "big")
        batches.append(sp_module.FetchedBatch(base, base + last_delta, producer_id,
                                              bool(attributes & 0x10), bool(attributes & 0x20)))
        buffer = buffer[size:]
    return batches


def _rejected_and_archiving(broker, sp_module, topic_id, now_ms=1000):
    """A share partition of ``g1`` on src-2 with DLQ on: offsets 0 and 2 REJECTed, 1 and 3
    ACCEPTed; returns it and its persisted state (ARCHIVING written)."""
    sp = sp_module.SharePartition(GROUP, "src", topic_id, 2,
                                  sp_module.SharePartitionConfig(dlq_enabled=True,
                                                                 auto_offset_reset="earliest"))
    log = broker.store.topic("src").log(2)
    sp.initialize(None, log_start_offset=0, log_end_offset=log.end_offset)
    acquired = sp.acquire("m1", _fetched_batches(sp_module, log), max_records=10, now_ms=now_ms)
    assert sum(a.last_offset - a.first_offset + 1 for a in acquired) == 4
    reject, accept = int(sp_module.AcknowledgeType.REJECT), int(sp_module.AcknowledgeType.ACCEPT)
    assert sp.acknowledge("m1", [sp_module.AckBatch(0, 3, (reject, accept, reject, accept))],
                          now_ms=now_ms) == 0
    persisted = sp.pending_write()
    sp.write_done(True)
    return sp, persisted


def _persist(sp):
    """What the share fetch path does after ``archiving_done``: persist the pending write
    (here: keep it, as the share coordinator would)."""
    written = []

    async def persist() -> bool:
        while (state := sp.pending_write()) is not None:
            written.append(state)
            sp.write_done(True)
        return True

    return persist, written


def test_archive_batches_with_the_share_partition(broker_factory):
    sp_module = _share_partition_module()
    broker = broker_factory(errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 4)
    topic_id = uuid.uuid4()
    sp, _persisted = _rejected_and_archiving(broker, sp_module, topic_id)
    batches = sp.take_dlq_batches()
    assert [(b.first_offset, b.last_offset, b.cause) for b in batches] == [
        (0, 0, CLIENT_REJECT), (2, 2, CLIENT_REJECT)]
    manager = _manager(broker, group_config=_groups())
    persist, written = _persist(sp)
    run_on_broker_loop(broker, manager.archive_batches(
        GROUP, TopicPartition("src", 2), topic_id, sp, batches, persist=persist))
    assert [(r.key, r.value, r.headers) for r in _dlq_records(broker, "dlq.g1")] == [
        (b"k0", b"v0", dlq_headers("src", 2, 0, GROUP, 1, CLIENT_REJECT)),
        (b"k2", b"v2", dlq_headers("src", 2, 2, GROUP, 1, CLIENT_REJECT))]
    archived = int(sp_module.RecordState.ARCHIVED)
    assert all(b.delivery_state == archived for state in written for b in state.batches
               if b.first_offset in (0, 2))
    assert manager.pending_ranges() == []


def test_a_failed_dlq_write_still_archives(broker_factory):
    # Kafka: "Failed to write to DLQ, proceeding to ARCHIVED regardless."
    sp_module = _share_partition_module()
    broker = broker_factory()  # no auto-create: the DLQ topic cannot be made
    _produce(broker.bootstrap, "src", 3, 2, 4)
    topic_id = uuid.uuid4()
    sp, _persisted = _rejected_and_archiving(broker, sp_module, topic_id)
    manager = _manager(broker, group_config=_groups())
    persist, written = _persist(sp)
    run_on_broker_loop(broker, manager.archive_batches(
        GROUP, TopicPartition("src", 2), topic_id, sp, sp.take_dlq_batches(), persist=persist))
    assert "dlq.g1" not in broker.store.topics()
    assert len(written) == 2


def test_share_partition_resumed_after_a_restart_writes_each_record_once(broker_factory,
                                                                          tmp_path):
    sp_module = _share_partition_module()
    data_dir = tmp_path / "data"
    broker = broker_factory(data_dir=data_dir,
                            errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 4)
    topic_id = uuid.uuid4()
    tp = TopicPartition("src", 2)
    sp, persisted = _rejected_and_archiving(broker, sp_module, topic_id)
    manager = _manager(broker, group_config=_groups())
    # The DLQ records of both batches are written; the broker stops before archiving_done
    # and the ARCHIVED write.
    for batch in sp.take_dlq_batches():
        run_on_broker_loop(broker, manager.enqueue(GROUP, tp, topic_id, batch.first_offset,
                                                   batch.last_offset, batch.delivery_count,
                                                   batch.cause))
    broker.stop()
    broker = broker_factory(data_dir=data_dir,
                            errors_deadletterqueue_auto_create_topics_enable="true")
    # The share partition loads the persisted ARCHIVING state and hands the batches again.
    sp = sp_module.SharePartition(GROUP, "src", topic_id, 2,
                                  sp_module.SharePartitionConfig(dlq_enabled=True))
    log = broker.store.topic("src").log(2)
    sp.initialize(persisted, log_start_offset=0, log_end_offset=log.end_offset)
    batches = sp.take_dlq_batches()
    assert [(b.first_offset, b.last_offset) for b in batches] == [(0, 0), (2, 2)]
    manager = _manager(broker, group_config=_groups())
    persist, _written = _persist(sp)
    run_on_broker_loop(broker, manager.archive_batches(GROUP, tp, topic_id, sp, batches,
                                                       persist=persist))
    offsets = [dict(r.headers)["__dlq.errors.offset"] for r in _dlq_records(broker, "dlq.g1")]
    assert offsets == [b"0", b"2"]
    assert manager.pending_ranges() == []


def test_group_configs_set_by_a_client_are_read(broker_factory):
    # The group's errors.deadletterqueue.* as IncrementalAlterConfigs (GROUP) sets them.
    pytest.importorskip("seglog.server.apis.group_configs")
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    broker = broker_factory(errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
        ConfigEntry("errors.deadletterqueue.topic.name", "dlq.g1",
                    incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)
    manager = _manager(broker)
    assert manager.dlq_topic(GROUP) == "dlq.g1" and manager.dlq_topic("other") == ""
    result = _enqueue(broker, manager, 1, 1)
    # copy.record.enable is false by default: headers only.
    assert (result.written, result.copied) == (1, 0)


def test_an_unreadable_progress_file_writes_as_kafka(broker_factory, tmp_path):
    # A damaged exactly-once record is not fatal: the manager starts without it.
    data_dir = tmp_path / "data"
    broker = broker_factory(data_dir=data_dir,
                            errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 1)
    broker.stop()
    (data_dir / PROGRESS_FILE).write_text("{not json")
    broker = broker_factory(data_dir=data_dir,
                            errors_deadletterqueue_auto_create_topics_enable="true")
    manager = _manager(broker, group_config=_groups())
    assert manager.pending_ranges() == []
    assert _enqueue(broker, manager, 0, 0).written == 1
    assert manager.pending_ranges() != []


def test_archiving_done_for_a_range_not_pending_is_logged(broker_factory):
    sp_module = _share_partition_module()
    broker = broker_factory(errors_deadletterqueue_auto_create_topics_enable="true")
    _produce(broker.bootstrap, "src", 3, 2, 4)
    topic_id = uuid.uuid4()
    sp, _persisted = _rejected_and_archiving(broker, sp_module, topic_id)
    sp.take_dlq_batches()
    manager = _manager(broker, group_config=_groups())
    persist, written = _persist(sp)
    # Offsets 1-1 were ACCEPTed, not ARCHIVING: written to the DLQ but nothing to archive.
    result = run_on_broker_loop(broker, manager.enqueue(
        GROUP, TopicPartition("src", 2), topic_id, 1, 1, 1, CLIENT_REJECT, share_partition=sp,
        persist=persist))
    assert result.written == 1 and written == []


def test_broker_configs_change_at_runtime(broker):
    # errors.deadletterqueue.* are cluster-wide dynamic broker configs (Kafka's
    # GroupCoordinatorConfig): set through IncrementalAlterConfigs, the next write takes them.
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    _produce(broker.bootstrap, "src", 3, 2, 1)
    manager = _manager(broker, group_config=_groups(topic="x.g1"))
    with pytest.raises(errors.InvalidConfigError, match="auto create is disabled"):
        _enqueue(broker, manager, 0, 0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.BROKER, str(broker.state.node_id),
                              incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in (("errors.deadletterqueue.auto.create.topics.enable", "true"),
                            ("errors.deadletterqueue.topic.name.prefix", "x."))])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)
    assert _enqueue(broker, manager, 0, 0).written == 1
