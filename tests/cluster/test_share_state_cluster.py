"""Share-group state (KIP-932) in a 3-broker ZooKeeper cluster: the share coordinator of a
share-partition is the leader of its ``__share_group_state`` partition (FindCoordinator key
type 2 names it, the others answer NOT_COORDINATOR on the wire); a broker's persister reaches
it over the inter-broker listener; the state written through one broker is replicated and
survives the coordinator's broker being stopped (the new leader loads it from its replica)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from seglog import error_codes as codes
from seglog.coordinator.share_coordinator import ShareState, StateBatch
from seglog.coordinator.share_state_records import SHARE_STATE_TOPIC, coordinator_key
from seglog.server.share_persister import find_share_persister
from seglog.types import TopicPartition
from test_coordinators import WAIT_S, _some, make_cluster, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))  # the wire helpers
from share_state_wire import call, find_share_coordinator, partition_answer, read  # noqa: E402

confluent_kafka = pytest.importorskip("confluent_kafka")
import confluent_kafka.admin  # noqa: E402

__all__ = ["make_cluster"]  # the fixture, imported for this module's tests

STATE = TopicPartition(SHARE_STATE_TOPIC, 0)
SHARE_CONFIG = {"share.coordinator.state.topic.num.partitions": 1,
                "share.coordinator.state.topic.replication.factor": 3,
                "share.coordinator.state.topic.min.isr": 2,
                "default.replication.factor": 3}


def _on_loop(cluster, broker_id, coroutine_fn):
    broker = cluster.brokers[broker_id]
    return asyncio.run_coroutine_threadsafe(coroutine_fn(), broker.loop).result(WAIT_S)


def _persister(cluster, broker_id):
    persister = find_share_persister(cluster.brokers[broker_id].state)
    assert persister is not None
    return persister


@pytest.mark.slow
def test_share_state_survives_the_coordinator(make_cluster, zk_client):
    cluster = make_cluster(3, **SHARE_CONFIG)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([confluent_kafka.admin.NewTopic("t", 2, 3)])["t"].result(20)
    topic_id = wait_until(lambda: _some(cluster.rm(0).assignments.get("t") and
                                        cluster.rm(0).assignments["t"].topic_id),
                          "the topic id of t")[0]
    key = coordinator_key("g", topic_id, 1)

    # FindCoordinator key type 2 makes __share_group_state (COORDINATOR_NOT_AVAILABLE
    # meanwhile), then every broker names its leader.
    def found():
        answer = call(cluster.address(0), find_share_coordinator(key)).coordinators[0]
        return (answer.error_code, answer.node_id) if answer.error_code == 0 else None
    coordinator = wait_until(found, "the share coordinator")[1]
    assert cluster.wait_for_isr(STATE, 3) == coordinator
    others = [b for b in cluster.brokers if b != coordinator]
    for broker_id in cluster.brokers:
        answer = call(cluster.address(broker_id), find_share_coordinator(key)).coordinators[0]
        assert (answer.error_code, answer.node_id) == (0, coordinator)

    # A broker that is not the coordinator answers NOT_COORDINATOR on the wire...
    answer = partition_answer(call(cluster.address(others[0]), read("g", topic_id, 1, 0)))
    assert answer["error_code"] == codes.NOT_COORDINATOR
    # ... and its persister sends the requests to the coordinator.
    persister = _persister(cluster, others[0])
    batches = (StateBatch(10, 19, 2, 1), StateBatch(20, 24, 0, 2))

    async def write():
        assert await persister.initialize_state("g", topic_id, 1, 1, 10) == 0
        code, state = await persister.read_state("g", topic_id, 1, 4)
        assert code == 0 and state.start_offset == 10
        assert await persister.write_state("g", topic_id, 1, ShareState(
            1, 10, batches, 4, 10)) == 0
        fenced = await persister.write_state("g", topic_id, 1, ShareState(1, 10, (), 3))
        assert fenced == codes.FENCED_LEADER_EPOCH
        return await persister.read_state("g", topic_id, 1, 4)

    code, before = _on_loop(cluster, others[0], write)
    assert code == 0 and before.batches == batches
    # Written through the coordinator (its log), replicated to every broker.
    wait_until(lambda: _some(all(
        cluster.rm(b).partitions[STATE].log.end_offset >= 3 for b in cluster.brokers)),
        "the state records on every replica")

    cluster.stop(coordinator)
    new_coordinator = wait_until(lambda: _some(cluster.leader_of(STATE)),
                                 f"a new {STATE} leader")[0]
    assert new_coordinator != coordinator
    survivor = [b for b in cluster.brokers if b != new_coordinator][0]

    async def read_back():
        return await _persister(cluster, survivor).read_state("g", topic_id, 1, 4)

    # The persister retries while the new leader loads; bounded by the test's wait.
    after = wait_until(lambda: _some(_answer_if_ok(_on_loop(cluster, survivor, read_back))),
                       "the state read through the new coordinator")[0]
    assert after == before
    answer = partition_answer(call(cluster.address(new_coordinator), read("g", topic_id, 1, 4)))
    assert answer["error_code"] == 0 and answer["start_offset"] == 10
    assert [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
            for b in answer["state_batches"]] == [(10, 19, 2, 1), (20, 24, 0, 2)]
    # The fencing state moved too.
    assert partition_answer(call(cluster.address(new_coordinator), read(
        "g", topic_id, 1, 3)))["error_code"] == codes.FENCED_LEADER_EPOCH

    # The survivor's persister: the summary and the delete go to the new coordinator.
    async def summary_then_delete():
        persister = _persister(cluster, survivor)
        summary = await persister.read_state_summary("g", topic_id, 1)
        deleted = await persister.delete_state("g", topic_id, 1)
        return summary, deleted, await persister.read_state("g", topic_id, 1, 4)

    summary, deleted, (code, state) = _on_loop(cluster, survivor, summary_then_delete)
    assert tuple(summary) == (0, 10, 1, 4, 10)
    assert deleted == 0 and code == codes.INVALID_REQUEST and state is None


def _answer_if_ok(answer):
    code, state = answer
    return state if code == 0 else None
