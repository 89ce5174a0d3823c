"""``seglog.cluster.zk_client.KafkaZkClient`` against a real ZooKeeper (Debian's 3.8).

Most tests are ports of Kafka 2.8.2's ``core/src/test/scala/unit/kafka/zk/KafkaZkClientTest.scala``
(each names its Kafka test); the rest check the fencing rules of research R§1.3 that Kafka tests
elsewhere or not at all (the election's lost-reply rule, a leader's ISR CAS), the producer-id
blocks (``ProducerIdManagerTest``), and the session behaviour R§1.4 measured: a forced expiry
gives a new session, a new registration gives a new broker epoch, and watches fire after the
reconnect. Every wait is bounded.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient

from seglog.cluster import zk_data
from seglog.cluster.zk_client import (
    CONNECTED,
    LOST,
    UNKNOWN_VERSION,
    BadVersionError,
    ControllerMovedError,
    KafkaZkClient,
    NodeExistsError,
    NoNodeError,
    ZooKeeperUnreachableError,
    expire_session,
    should_recreate_ephemeral,
)
from seglog.cluster.zk_data import (
    BrokerInfo,
    BrokerRegistration,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
    ZkDataError,
)
from seglog.errors import InvalidTopicError, TopicExistsError
from seglog.types import TopicPartition

WAIT_S = 15.0  # bound of every wait for a ZooKeeper event (sessions here time out in 4 s)

TOPIC1, TOPIC2 = "topic1", "topic2"
TP10, TP11, TP20 = TopicPartition(TOPIC1, 0), TopicPartition(TOPIC1, 1), TopicPartition(TOPIC2, 0)


def wait_for(predicate, what: str, timeout_s: float = WAIT_S):
    """Poll ``predicate`` until it returns a truthy value (returned) or fail after the bound."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def other_zk_client(zk_connect):
    """A second broker's client (its own session) on the same chroot."""
    client = KafkaZkClient(zk_connect, session_timeout_ms=4000)
    client.start()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def controller_epoch_zk_version(zk_client):
    """Kafka's test setup: ``/controller_epoch`` created (epoch 1), its zkVersion 0."""
    zk_client.create_recursive(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(1))
    return 0


def registration(broker_id: int, host: str = "test.host", port: int = 9999) -> BrokerRegistration:
    return BrokerRegistration(broker_id=broker_id, host=host, port=port)


def initial_states(controller_epoch: int = 4) -> dict[TopicPartition, PartitionState]:
    """Kafka's ``initialLeaderIsrAndControllerEpochs``: leader 1, epoch 0, ISR (1, 2)."""
    return {tp: PartitionState(leader=1, leader_epoch=0, isr=(1, 2),
                               controller_epoch=controller_epoch, zk_version=0)
            for tp in (TP10, TP11)}


def states_at(state: int, zk_version: int, tps=(TP10, TP11)) -> dict[TopicPartition, PartitionState]:
    """Kafka's ``leaderIsrs(state, zkVersion)``: leader ``state + 1``, epoch ``state``."""
    return {tp: PartitionState(leader=state + 1, leader_epoch=state, isr=(state + 1, state + 2),
                               controller_epoch=4, zk_version=zk_version) for tp in tps}


# ---------------------------------------------------------------- generic path methods


def test_create_top_level_paths(zk_client):
    # KafkaZkClientTest.testCreateTopLevelPaths (the fixture ran ensure_persistent_paths).
    for path in zk_data.PERSISTENT_PATHS:
        assert zk_client.path_exists(path), path
    zk_client.ensure_persistent_paths()  # idempotent


def test_create_recursive(zk_client):
    # KafkaZkClientTest.testCreateRecursive
    zk_client.create_recursive("/create-newrootpath")
    assert zk_client.path_exists("/create-newrootpath")
    zk_client.create_recursive("/create/some/random/long/path")
    assert zk_client.path_exists("/create/some/random/long/path")
    zk_client.create_recursive("/create/some/random/long/path", throw_if_exists=False)
    with pytest.raises(NodeExistsError):
        zk_client.create_recursive("/create/some/random/long/path")
    with pytest.raises(ValueError):
        zk_client.create_recursive("create-invalid-path")


def test_delete_recursive(zk_client):
    # KafkaZkClientTest.testDeleteRecursive
    assert not zk_client.delete_recursive("/delete/does-not-exist")
    zk_client.create_recursive("/delete/some/random/path")
    zk_client.create_recursive("/delete/some/other")
    assert zk_client.delete_recursive("/delete")
    assert not zk_client.path_exists("/delete")
    with pytest.raises(ValueError):
        zk_client.delete_recursive("delete-invalid-path")


def test_delete_recursive_with_controller_epoch_version_check(zk_client,
                                                              controller_epoch_zk_version):
    # KafkaZkClientTest.testDeleteRecursiveWithControllerEpochVersionCheck
    version = controller_epoch_zk_version
    assert not zk_client.delete_recursive("/delete/does-not-exist",
                                          controller_epoch_zk_version=version)
    zk_client.create_recursive("/delete/some/random/path")
    with pytest.raises(ControllerMovedError):
        zk_client.delete_recursive("/delete", controller_epoch_zk_version=version + 1)
    assert zk_client.path_exists("/delete/some/random/path")  # nothing deleted
    assert zk_client.delete_recursive("/delete", controller_epoch_zk_version=version)
    assert not zk_client.path_exists("/delete")


def test_get_data_and_version(zk_client):
    # KafkaZkClientTest.testGetDataAndVersion
    path = "/testpath"
    assert zk_client.get_data_and_version(path) == (None, UNKNOWN_VERSION)
    zk_client.create_recursive(path, b"version1")
    assert zk_client.get_data_and_version(path) == (b"version1", 0)
    assert zk_client.conditional_update_path(path, b"version2", 0) == (True, 1)
    assert zk_client.get_data_and_version(path) == (b"version2", 1)


def test_conditional_update_path(zk_client):
    # KafkaZkClientTest.testConditionalUpdatePath
    path = "/testconditionalpath"
    assert zk_client.conditional_update_path(path, b"version0", 0) == (False, UNKNOWN_VERSION)
    zk_client.create_recursive(path)
    assert zk_client.conditional_update_path(path, b"version1", 0) == (True, 1)
    assert zk_client.conditional_update_path(path, b"version2", 2) == (False, UNKNOWN_VERSION)
    assert zk_client.get_data_and_version(path) == (b"version1", 1)


# -------------------------------------------------------------------------- topics


def test_topic_assignment_methods(zk_client):
    # KafkaZkClientTest.testTopicAssignmentMethods
    assert zk_client.topics() == [] and zk_client.topic_assignments() == {}
    assert zk_client.topic_assignment(TOPIC1) is None
    topic_id = uuid.uuid4()
    assignment = TopicAssignment(TOPIC1, topic_id, {0: [0, 1], 1: [0, 1], 2: [1, 2, 3]})
    zk_client.create_topic(assignment, {})
    assert zk_client.topic_assignment(TOPIC1) == assignment
    updated = TopicAssignment(TOPIC1, topic_id, {0: [0, 1], 1: [0, 1]})
    assert zk_client.set_topic_assignment(updated) == 1
    assert zk_client.topic_assignment(TOPIC1) == updated
    second = TopicAssignment(TOPIC2, uuid.uuid4(), {0: [0, 1], 1: [0, 1]})
    zk_client.create_topic(second, {"min.insync.replicas": "2"})
    assert zk_client.topics() == [TOPIC1, TOPIC2]
    assert zk_client.topic_assignments() == {TOPIC1: updated, TOPIC2: second}
    # The bytes are Kafka's JSON.
    assert zk_client.get_data_and_version(zk_data.topic_path(TOPIC2))[0] == (
        zk_data.encode_topic(second))


def test_create_topic_writes_config_first_and_refuses_an_existing_topic(zk_client):
    assignment = TopicAssignment(TOPIC1, uuid.uuid4(), {0: [1]})
    zk_client.create_topic(assignment, {"cleanup.policy": "compact"})
    assert zk_client.topic_config(TOPIC1) == {"cleanup.policy": "compact"}
    with pytest.raises(TopicExistsError):
        zk_client.create_topic(TopicAssignment(TOPIC1, uuid.uuid4(), {0: [2]}), {})
    assert zk_client.topic_assignment(TOPIC1) == assignment
    assert zk_client.topic_config(TOPIC1) == {"cleanup.policy": "compact"}
    for bad in ("", ".", "..", "a/b", "x" * 250, "spaces are bad"):
        with pytest.raises(InvalidTopicError):
            zk_client.create_topic(TopicAssignment(bad, None, {0: [1]}), {})


def test_entity_config_management_methods(zk_client):
    # KafkaZkClientTest.testEntityConfigManagementMethods (+ the change notification of
    # AdminZkClient.changeTopicConfig)
    assert zk_client.topic_config(TOPIC1) == {}
    log_props = {"segment.bytes": "1024", "segment.index.bytes": "1024",
                 "cleanup.policy": "compact"}
    zk_client.set_topic_config(TOPIC1, log_props)
    assert zk_client.topic_config(TOPIC1) == log_props
    del log_props["cleanup.policy"]
    zk_client.set_topic_config(TOPIC1, log_props)
    assert zk_client.topic_config(TOPIC1) == log_props
    assert zk_client.config_change_notifications() == {
        "config_change_0000000000": "topics/topic1", "config_change_0000000001": "topics/topic1"}


def test_create_config_change_notification(zk_client):
    # KafkaZkClientTest.testCreateConfigChangeNotification: the parent is created if needed.
    zk_client.delete_recursive(zk_data.CONFIG_CHANGES_PATH)
    assert zk_client.create_config_change_notification("topics/topic1") == (
        "/config/changes/config_change_0000000000")
    assert zk_client.get_data_and_version("/config/changes/config_change_0000000000")[0] == (
        b'{"version":2,"entity_path":"topics/topic1"}')
    assert zk_client.create_config_change_notification("topics/topic2") == (
        "/config/changes/config_change_0000000001")


def test_delete_topic_path_methods(zk_client, controller_epoch_zk_version):
    # KafkaZkClientTest.testDeleteTopicPathMethods
    assert zk_client.topic_deletion_requests() == []
    zk_client.delete_topic_request(TOPIC1)
    zk_client.delete_topic_request(TOPIC2)
    zk_client.delete_topic_request(TOPIC2)  # already asked: no-op
    assert zk_client.topic_deletion_requests() == [TOPIC1, TOPIC2]
    with pytest.raises(ControllerMovedError):
        zk_client.delete_topic_deletion_request(
            TOPIC1, controller_epoch_zk_version=controller_epoch_zk_version + 1)
    assert zk_client.topic_deletion_requests() == [TOPIC1, TOPIC2]
    for topic in (TOPIC1, TOPIC2):
        zk_client.delete_topic_deletion_request(
            topic, controller_epoch_zk_version=controller_epoch_zk_version)
    assert zk_client.topic_deletion_requests() == []


def test_delete_topic_znode(zk_client, controller_epoch_zk_version):
    # KafkaZkClientTest.testDeleteTopicZNode (+ deleteTopicConfigs)
    version = controller_epoch_zk_version
    zk_client.delete_topic_znodes(TOPIC1, controller_epoch_zk_version=version)  # none: fine
    zk_client.create_topic(TopicAssignment(TOPIC1, uuid.uuid4(), {0: [1], 1: [1]}), {"a": "b"})
    zk_client.create_partition_states(initial_states(), controller_epoch_zk_version=version)
    with pytest.raises(ControllerMovedError):
        zk_client.delete_topic_znodes(TOPIC1, controller_epoch_zk_version=version + 1)
    assert zk_client.partition_states([TP10, TP11]) == initial_states()
    zk_client.delete_topic_znodes(TOPIC1, controller_epoch_zk_version=version)
    assert not zk_client.path_exists(zk_data.topic_path(TOPIC1))
    assert not zk_client.path_exists(zk_data.topic_config_path(TOPIC1))


# -------------------------------------------------------------------------- brokers


def test_register_broker_info(zk_client, other_zk_client):
    # KafkaZkClientTest.testRegisterBrokerInfo
    epoch = zk_client.register_broker(registration(1))
    expected = BrokerInfo(1, "test.host", 9999, None, epoch,
                         (("PLAINTEXT", "test.host", 9999),))
    assert zk_client.broker(1) == expected
    assert other_zk_client.broker(1) == expected, "other clients can read the registration"
    # The node exists, owned by this session: no error, no update.
    assert zk_client.register_broker(registration(1, "test.host2", 9995)) == epoch
    assert zk_client.broker(1) == expected
    # Another live session registering the same id fails; the registration is unchanged.
    with pytest.raises(NodeExistsError):
        other_zk_client.register_broker(registration(1, "test.host2", 9995))
    assert zk_client.broker(1) == expected
    # The znode is an ephemeral of this session, holding Kafka's v5 JSON.
    data, _ = zk_client.get_data_and_version(zk_data.broker_path(1))
    assert zk_data.decode_broker(1, data) == BrokerInfo(1, "test.host", 9999, None, -1,
                         (("PLAINTEXT", "test.host", 9999),))
    assert b'"version":5' in data


class _PreviousSessionClient(KafkaZkClient):
    """KafkaZkClientTest's ``ExpiredKafkaZkClient``: a client that believes ``previous`` was
    the session of its last registration (the state ZOOKEEPER-2985 leaves behind)."""

    previous: int | None = None

    @property
    def registered_session_id(self) -> int | None:
        return self.previous


def test_retry_register_broker_info(zk_connect, zk_client):
    # KafkaZkClientTest.testRetryRegisterBrokerInfo: a leftover ephemeral of our previous
    # session is deleted and created again, with a new czxid (broker epoch).
    original_epoch = zk_client.register_broker(registration(5))
    client = _PreviousSessionClient(zk_connect, session_timeout_ms=4000)
    client.start()
    try:
        client.previous = zk_client.session_id
        new_epoch = client.register_broker(registration(5))
        assert new_epoch != original_epoch
        assert client.broker(5) == BrokerInfo(5, "test.host", 9999, None, new_epoch,
                         (("PLAINTEXT", "test.host", 9999),))
        raw = KazooClient(hosts=zk_connect, timeout=4)
        raw.start(timeout=WAIT_S)
        try:
            stat = raw.exists(zk_data.broker_path(5))
        finally:
            raw.stop()
            raw.close()
        assert stat.ephemeralOwner == client.session_id != zk_client.session_id
        assert stat.version == 1  # created empty, then setData(version 0)
    finally:
        client.close()


def test_should_recreate_ephemeral_rule():
    # KafkaZkClient.shouldReCreateEphemeralZNode
    assert should_recreate_ephemeral(owner_session_id=7, current_session_id=8,
                                     registered_session_id=7)
    assert not should_recreate_ephemeral(7, 7, 7)       # ours, this session
    assert not should_recreate_ephemeral(9, 8, 7)       # another broker's
    assert not should_recreate_ephemeral(7, 8, None)    # never registered


def test_get_broker_methods(zk_client, other_zk_client):
    # KafkaZkClientTest.testGetBrokerMethods
    assert zk_client.live_brokers() == {} and zk_client.broker(0) is None
    epoch1 = zk_client.register_broker(registration(1, "test.host1", 9999))
    epoch0 = other_zk_client.register_broker(registration(0, "test.host0", 9998))
    assert list(zk_client.live_brokers()) == [0, 1]
    assert zk_client.live_brokers() == {
        0: BrokerInfo(0, "test.host0", 9998, None, epoch0,
                         (("PLAINTEXT", "test.host0", 9998),)),
        1: BrokerInfo(1, "test.host1", 9999, None, epoch1,
                         (("PLAINTEXT", "test.host1", 9999),))}
    assert epoch0 > epoch1  # czxids grow
    other_zk_client.close()  # a clean close removes the ephemeral at once
    assert list(zk_client.live_brokers()) == [1]


def test_session_expiry_then_reregistration_gives_a_new_broker_epoch(zk_connect, zk_client,
                                                                     other_zk_client):
    # R§1.4 and KafkaController's RegisterBrokerAndReelect: a new session, a new epoch.
    states = []
    zk_client.add_session_listener(states.append)
    epoch = zk_client.register_broker(registration(1))
    old_session = zk_client.session_id
    expire_session(zk_connect, old_session, zk_client.session_password)
    assert other_zk_client.broker(1) is None  # the ephemeral went with the session
    wait_for(lambda: LOST in states and states[-1] == CONNECTED, "LOST then CONNECTED")
    assert zk_client.session_id != old_session
    new_epoch = zk_client.register_broker(registration(1))
    assert new_epoch > epoch
    assert other_zk_client.broker(1).epoch == new_epoch


# --------------------------------------------------------------------- partition states


def test_create_and_get_partition_states(zk_client, controller_epoch_zk_version):
    # KafkaZkClientTest.testCreateAndGetTopicPartitionStatesRaw
    version = controller_epoch_zk_version
    zk_client.create_recursive(zk_data.topic_path(TOPIC1))
    with pytest.raises(ControllerMovedError):
        zk_client.create_partition_states(initial_states(), controller_epoch_zk_version=version + 1)
    assert zk_client.partition_states([TP10, TP11]) == {}  # nothing written
    assert zk_client.create_partition_states(initial_states(), controller_epoch_zk_version=version) == {
        TP10: 0, TP11: 0}
    assert zk_client.partition_states([TP10, TP11]) == initial_states()
    assert zk_client.get_data_and_version(zk_data.partition_state_path(TP10))[0] == (
        b'{"controller_epoch":4,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}')
    again = zk_client.create_partition_states(initial_states(), controller_epoch_zk_version=version)
    assert all(isinstance(result, NodeExistsError) for result in again.values())


def test_get_partition_states(zk_client, controller_epoch_zk_version):
    # KafkaZkClientTest.testGetTopicPartitionStates and testGetTopicsAndPartitions
    assert zk_client.partition_states([TP10]) == {}
    zk_client.create_recursive(zk_data.topic_path(TOPIC1))
    zk_client.create_partition_states(initial_states(),
                                      controller_epoch_zk_version=controller_epoch_zk_version)
    missing = TopicPartition(TOPIC1, 2)
    assert zk_client.partition_states([TP10, missing]) == {TP10: initial_states()[TP10]}
    assert zk_client.get_children(zk_data.topic_partitions_path(TOPIC1)) == ["0", "1"]
    # A partition of a topic without an assignment cannot get a state.
    result = zk_client.create_partition_states(
        {TP20: initial_states()[TP10]}, controller_epoch_zk_version=controller_epoch_zk_version)
    assert isinstance(result[TP20], NoNodeError)


def test_update_leader_and_isr(zk_client, controller_epoch_zk_version):
    # KafkaZkClientTest.testUpdateLeaderAndIsr (the controller's setPartitionStates CAS)
    version = controller_epoch_zk_version
    zk_client.create_recursive(zk_data.topic_path(TOPIC1))
    results = zk_client.set_partition_states(initial_states(), controller_epoch_zk_version=version)
    assert all(isinstance(r, NoNodeError) for r in results.values())
    zk_client.create_partition_states(initial_states(), controller_epoch_zk_version=version)
    with pytest.raises(ControllerMovedError):
        zk_client.set_partition_states(initial_states(), controller_epoch_zk_version=version + 1)
    assert zk_client.set_partition_states(states_at(1, zk_version=0),
                                          controller_epoch_zk_version=version) == {TP10: 1, TP11: 1}
    assert zk_client.partition_states([TP10, TP11]) == states_at(1, zk_version=1)
    stale = zk_client.set_partition_states(states_at(1, zk_version=0),
                                           controller_epoch_zk_version=version)
    assert all(isinstance(r, BadVersionError) for r in stale.values())
    # Successful, to-be-retried and failed partitions in the same call.
    mixed = {TP10: PartitionState(1, 2, (4, 5), 4, zk_version=1),
             TP11: PartitionState(0, 2, (3, 4), 4, zk_version=0),
             TP20: PartitionState(0, 2, (3, 4), 4, zk_version=0)}
    results = zk_client.set_partition_states(mixed, controller_epoch_zk_version=version)
    assert results[TP10] == 2
    assert isinstance(results[TP11], BadVersionError)
    assert isinstance(results[TP20], NoNodeError)


def test_set_partition_states_by_another_client(zk_client, other_zk_client,
                                                controller_epoch_zk_version):
    # KafkaZkClientTest.testSetTopicPartitionStatesRaw: any client holding the epoch's
    # zkVersion can write (the fence is the check, not the session).
    version = controller_epoch_zk_version
    zk_client.create_recursive(zk_data.topic_path(TOPIC1))
    zk_client.create_partition_states(initial_states(), controller_epoch_zk_version=version)
    zk_client.set_partition_states(states_at(1, 0), controller_epoch_zk_version=version)
    assert other_zk_client.set_partition_states(
        states_at(2, 1), controller_epoch_zk_version=version) == {TP10: 2, TP11: 2}


def test_leader_isr_cas(zk_client, controller_epoch_zk_version):
    # ZkIsrManager / ReplicationUtils.updateLeaderAndIsr with checkLeaderAndIsrZkData.
    zk_client.create_recursive(zk_data.topic_path(TOPIC1))
    zk_client.create_partition_states(initial_states(),
                                      controller_epoch_zk_version=controller_epoch_zk_version)
    shrunk = PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=4)
    assert zk_client.update_isr(TP10, shrunk, expected_zk_version=0) == 1
    # The same write again at the old version: the znode already holds it (a lost reply).
    assert zk_client.update_isr(TP10, shrunk, expected_zk_version=0) == 1
    expanded = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=4)
    with pytest.raises(BadVersionError):
        zk_client.update_isr(TP10, expanded, expected_zk_version=0)  # a zombie's stale CAS
    assert zk_client.partition_states([TP10])[TP10] == PartitionState(1, 0, (1,), 4, 1)
    with pytest.raises(NoNodeError):
        zk_client.update_isr(TopicPartition(TOPIC1, 9), shrunk, expected_zk_version=0)


# -------------------------------------------------------------------------- controller


def test_controller_epoch_methods_and_election(zk_client, other_zk_client):
    # KafkaZkClientTest.testControllerEpochMethods / testControllerManagementMethods and
    # registerControllerAndIncrementControllerEpoch (R§1.3.3).
    assert zk_client.controller_epoch() is None and zk_client.controller_id() is None
    won = zk_client.try_elect_controller(1)
    assert won == (1, 1)  # /controller_epoch created at 0 (version 0), then set to 1
    assert zk_client.controller_id() == 1 and other_zk_client.controller_id() == 1
    assert zk_client.controller_epoch() == (1, 1)
    assert zk_client.get_data_and_version(zk_data.CONTROLLER_EPOCH_PATH) == (b"1", 1)
    assert other_zk_client.try_elect_controller(2) is None
    assert zk_client.try_elect_controller(1) is None  # not a lost reply: the epoch moved on
    assert zk_client.controller_epoch() == (1, 1)  # the losers changed nothing
    with pytest.raises(ControllerMovedError):
        zk_client.delete_controller(controller_epoch_zk_version=won.zk_version + 1)
    zk_client.delete_controller(controller_epoch_zk_version=won.zk_version)
    assert zk_client.controller_id() is None
    zk_client.delete_controller(controller_epoch_zk_version=won.zk_version)  # gone: no-op
    second = other_zk_client.try_elect_controller(2)
    assert second == (2, 2) and zk_client.controller_id() == 2


def test_deposed_controller_writes_nothing(zk_client, other_zk_client):
    # R§1.3.2: every write of the old controller is fenced by /controller_epoch's zkVersion.
    first = zk_client.try_elect_controller(1)
    zk_client.create_recursive(zk_data.topic_path(TOPIC1))
    zk_client.create_partition_states(initial_states(1),
                                      controller_epoch_zk_version=first.zk_version)
    zk_client.delete_controller(controller_epoch_zk_version=first.zk_version)
    second = other_zk_client.try_elect_controller(2)
    assert second.epoch == first.epoch + 1
    with pytest.raises(ControllerMovedError):
        zk_client.set_partition_states(states_at(5, 0), controller_epoch_zk_version=first.zk_version)
    assert zk_client.partition_states([TP10, TP11]) == initial_states(1)
    assert other_zk_client.set_partition_states(
        states_at(5, 0), controller_epoch_zk_version=second.zk_version) == {TP10: 1, TP11: 1}


class _LostReplyClient(KafkaZkClient):
    """A candidate whose election ``multi`` meets its own earlier, committed attempt: right
    after it reads the epoch, ``/controller`` (naming it) and the next epoch are written as
    that attempt wrote them, so its ``multi`` fails and only the re-read can tell it won."""

    interfere_with: KazooClient | None = None

    def controller_epoch(self):
        current = super().controller_epoch()
        other, self.interfere_with = self.interfere_with, None
        if other is not None and current is not None:
            transaction = other.transaction()
            transaction.create(zk_data.CONTROLLER_PATH, zk_data.encode_controller(7, 1),
                               ephemeral=True)
            transaction.set_data(zk_data.CONTROLLER_EPOCH_PATH,
                                 zk_data.encode_controller_epoch(current.epoch + 1),
                                 version=current.zk_version)
            transaction.commit()
        return current


def test_election_counts_a_committed_multi_whose_reply_was_lost(zk_connect, zk_client):
    # registerControllerAndIncrementControllerEpoch's checkControllerAndEpoch branch.
    zk_client.create_recursive(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(3))
    raw = KazooClient(hosts=zk_connect, timeout=4)
    raw.start(timeout=WAIT_S)
    candidate = _LostReplyClient(zk_connect, session_timeout_ms=4000)
    candidate.start()
    try:
        candidate.interfere_with = raw
        assert candidate.try_elect_controller(7) == (4, 1)
        # The same interleaving for a broker the node does not name is a loss.
        raw.delete(zk_data.CONTROLLER_PATH)
        candidate.interfere_with = raw
        assert candidate.try_elect_controller(8) is None
    finally:
        candidate.close()
        raw.stop()
        raw.close()


# ------------------------------------------------------------------- cluster id, pids


def test_cluster_id_methods(zk_client, other_zk_client):
    # KafkaZkClientTest.testClusterIdMethods
    assert zk_client.get_cluster_id() is None
    cluster_id = zk_client.get_or_create_cluster_id()
    assert len(cluster_id) == 22
    assert zk_client.get_or_create_cluster_id() == cluster_id
    assert other_zk_client.get_or_create_cluster_id() == cluster_id
    assert zk_client.get_data_and_version(zk_data.CLUSTER_ID_PATH)[0] == (
        zk_data.encode_cluster_id(cluster_id))


def test_producer_id_blocks(zk_client, other_zk_client):
    # ProducerIdManagerTest.testGetProducerId: blocks of 1000, claimed in turn.
    assert zk_client.allocate_producer_id_block(0) == ProducerIdBlock(0, 0, 999)
    assert other_zk_client.allocate_producer_id_block(1) == ProducerIdBlock(1, 1000, 1999)
    assert zk_client.allocate_producer_id_block(0) == ProducerIdBlock(0, 2000, 2999)
    assert zk_client.get_data_and_version(zk_data.PRODUCER_ID_BLOCK_PATH)[0] == (
        b'{"version":1,"broker":0,"block_start":"2000","block_end":"2999"}')


def test_producer_id_blocks_are_unique_under_contention(zk_client, other_zk_client):
    # The CAS loop: two brokers allocating at once never get the same block.
    claimed: list[ProducerIdBlock] = []
    errors: list[BaseException] = []

    def allocate(client, broker_id):
        try:
            for _ in range(15):
                claimed.append(client.allocate_producer_id_block(broker_id))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=allocate, args=(c, i))
               for i, c in enumerate((zk_client, other_zk_client))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not errors and not any(t.is_alive() for t in threads)
    assert sorted(b.start for b in claimed) == [1000 * i for i in range(30)]


def test_producer_ids_exhausted(zk_client):
    # ProducerIdManagerTest.testExceedProducerIdLimit
    zk_client.conditional_update_path(
        zk_data.PRODUCER_ID_BLOCK_PATH,
        zk_data.encode_producer_id_block(ProducerIdBlock(1, 0, 2 ** 63 - 1000)), 0)
    with pytest.raises(ZkDataError, match="exhausted"):
        zk_client.allocate_producer_id_block(1)


# -------------------------------------------------------------------------- watches


def test_data_and_children_watches_fire_after_a_new_session(zk_connect, zk_client,
                                                            other_zk_client):
    # kazoo #151: plain watches die with their session; the recipes re-arm and deliver what
    # changed while they were down.
    path = zk_data.partition_state_path(TP10)
    seen_data: list[bytes | None] = []
    seen_children: list[list[str]] = []
    zk_client.watch_data(path, lambda data, stat: seen_data.append(data))
    zk_client.watch_children(zk_data.BROKER_IDS_PATH, seen_children.append)
    assert seen_data == [None] and seen_children == [[]]  # called at once, in this thread
    other_zk_client.create_recursive(path, b"one")
    wait_for(lambda: seen_data[-1:] == [b"one"], "the data watch on creation")
    states = []
    zk_client.add_session_listener(states.append)
    expire_session(zk_connect, zk_client.session_id, zk_client.session_password)
    # Changed while the old session's watches are gone and before the new ones exist.
    other_zk_client.conditional_update_path(path, b"two", 0)
    other_zk_client.register_broker(registration(3))
    wait_for(lambda: LOST in states and states[-1] == CONNECTED, "the new session")
    wait_for(lambda: seen_data[-1:] == [b"two"], "the data watch after the new session")
    wait_for(lambda: seen_children[-1:] == [["3"]], "the children watch after the new session")
    # And they keep watching in the new session.
    other_zk_client.conditional_update_path(path, b"three", 1)
    wait_for(lambda: seen_data[-1:] == [b"three"], "the data watch in the new session")


def test_watch_stops_when_its_function_says_false_or_stop_is_called(zk_client, other_zk_client):
    calls = []
    watch = zk_client.watch_data("/w", lambda data, stat: calls.append(data) or data != b"2")
    other_zk_client.create_recursive("/w", b"1")
    wait_for(lambda: calls[-1:] == [b"1"], "the first change")
    other_zk_client.conditional_update_path("/w", b"2", 0)
    wait_for(lambda: calls[-1:] == [b"2"], "the second change")
    assert not watch.active
    other_zk_client.conditional_update_path("/w", b"3", 1)
    children = []
    watch2 = zk_client.watch_children("/w", children.append)
    watch2.stop()
    # A sync point: kazoo delivers a session's watch events in order on one thread, so once a
    # live watch has seen the last change, the stopped ones have had theirs (and ignored them).
    seen = []
    zk_client.watch_data("/w", lambda data, stat: seen.append(data))
    other_zk_client.create_recursive("/w/child")
    other_zk_client.conditional_update_path("/w", b"4", 2)
    wait_for(lambda: seen[-1:] == [b"4"], "the live watch")
    assert calls == [None, b"1", b"2"] and children == [[]]


def test_watch_children_of_a_missing_znode_raises(zk_client):
    with pytest.raises(NoNodeError):
        zk_client.watch_children("/nothing/here", lambda children: None)


# ------------------------------------------------------------------------ connection


def test_unreachable_zookeeper_is_a_typed_error_within_the_timeout():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens on it
    client = KafkaZkClient(f"127.0.0.1:{port}", session_timeout_ms=4000,
                           connection_timeout_ms=500)
    with pytest.raises(ZooKeeperUnreachableError):
        client.start()
    with pytest.raises(ZooKeeperUnreachableError):
        client.live_brokers()  # closed after the failed start


def test_closed_client_raises_unreachable(zk_connect):
    client = KafkaZkClient(zk_connect, session_timeout_ms=4000)
    with pytest.raises(ZooKeeperUnreachableError):
        client.controller_id()  # not started
    client.start()
    client.close()
    client.close()  # idempotent
    with pytest.raises(ZooKeeperUnreachableError):
        client.controller_id()


def test_bad_bytes_in_a_znode_are_a_typed_error(zk_client):
    zk_client.create_recursive(zk_data.CONTROLLER_PATH, b"{not json")
    with pytest.raises(ZkDataError):
        zk_client.controller_id()
    zk_client.create_recursive(zk_data.topic_path(TOPIC1), b'{"partitions":{"x":[1]}}')
    with pytest.raises(ZkDataError):
        zk_client.topic_assignments()
    zk_client.create_recursive(zk_data.BROKER_IDS_PATH + "/not-an-id")
    assert zk_client.live_brokers() == {}  # skipped, logged


@pytest.mark.slow
def test_operations_ride_out_a_zookeeper_freeze_and_give_up_after_the_timeout(zookeeper,
                                                                              tmp_path):
    # Kafka's retryRequestsUntilConnected: a request sent to a frozen ZooKeeper survives the
    # connection loss (kazoo drops the connection after ~2/3 of the session timeout without a
    # ping answer) and completes once it is connected again, within the connection timeout;
    # past the timeout, a typed error. (Its own ZooKeeper: the session's is never frozen.)
    from seglog.cluster.zk_client import SUSPENDED
    from seglog.cluster.zookeeper import ZooKeeperServer

    server = ZooKeeperServer(tmp_path / "zk")  # installed: the `zookeeper` fixture checked it
    server.start()
    patient = KafkaZkClient(server.connect, session_timeout_ms=6000, connection_timeout_ms=15000)
    hasty = KafkaZkClient(server.connect, session_timeout_ms=6000, connection_timeout_ms=300)
    try:
        patient.start()
        hasty.start()
        patient.ensure_persistent_paths()
        states, outcome = [], []
        patient.add_session_listener(states.append)
        server.suspend()
        worker = threading.Thread(target=lambda: outcome.append(
            patient.register_broker(registration(1))))
        worker.start()
        with pytest.raises(ZooKeeperUnreachableError):
            hasty.controller_id()
        wait_for(lambda: SUSPENDED in states, "the patient client losing its connection")
        server.resume()
        worker.join(WAIT_S)
        assert not worker.is_alive() and len(outcome) == 1
        assert LOST not in states  # the same session throughout: the freeze was shorter
        assert hasty.broker(1) == BrokerInfo(1, "test.host", 9999, None, outcome[0],
                         (("PLAINTEXT", "test.host", 9999),))
    finally:
        if server.suspended:
            server.resume()
        patient.close()
        hasty.close()
        server.stop()
