"""The replica manager's rules on real brokers (two, in process, over the real ZooKeeper),
asked with raw Kafka requests so every error code is seen as sent.

Ported from Kafka 2.8's tests: ``PartitionTest.testReadRecordEpochValidationForLeader`` /
``testReadRecordEpochValidationForFollower``, ``testFetchOffsetForTimestampEpochValidation
ForLeader``, ``testOffsetForLeaderEpochValidationForLeader`` (CurrentLeaderEpoch fencing);
``ReplicaManagerTest.testBecomeFollowerWhenLeaderIsUnchangedButMissedLeaderUpdate``
(KAFKA-7164: a new epoch with the same leader still reaches the fetcher) and the
``becomeLeaderOrFollower`` rule that an older epoch is ignored; ``DelayedProduce``'s outcomes
(REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND), with the negative controls
``skip_epoch_check`` and ``ack_on_append`` showing each check is what makes the difference.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import sys
import time

import pytest
from seglog.schemas import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from seglog._backend import get_backend
from seglog.cluster import zk_data
from seglog.cluster.fetcher import FetchTarget
from seglog.cluster.test_breaks import NO_TEST_BREAKS, TestBreaks
from seglog.types import TopicPartition

from test_broker_cluster import Cluster, create_topic, wait_until

TOPIC = "rm"
TP = TopicPartition(TOPIC, 0)


#: The brokers of ``pair`` with one negative control on (``indirect`` parametrization).
SKIP_EPOCH_CHECK = TestBreaks.of("skip_epoch_check")
ACK_ON_APPEND = TestBreaks.of("ack_on_append")


@pytest.fixture
def pair(tmp_path, zk_connect, request):
    """Two brokers and an RF-2 topic ``rm`` with both replicas in the ISR; yields
    ``(cluster, leader id, follower id)``. Parametrized indirectly, the parameter is the
    brokers' :class:`TestBreaks` (default none)."""
    cluster = Cluster(tmp_path, zk_connect, size=2,
                      test_breaks=getattr(request, "param", NO_TEST_BREAKS))
    try:
        wait_until(lambda: all(len(cluster.rm(b).live_brokers) == 2 for b in cluster.brokers),
                   "both brokers to see each other")
        create_topic(cluster, TOPIC, replication_factor=2)
        leader = cluster.wait_for_isr(TP, 2)
        follower = next(b for b in cluster.brokers if b != leader)
        yield cluster, leader, follower
    finally:
        cluster.close()


def _module(api_key: int, version: int):
    return sys.modules[load_request_schema(api_key, version).__module__]


def call(broker, api_key: int, version: int, request, timeout_s: float = 10.0):
    """Send one flexible-version request to ``broker`` and return kio's decoded response."""
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    header = struct.pack(">hhih", api_key, version, 7, 4) + b"test" + b"\x00"
    frame = header + body.getvalue()
    with socket.create_connection(("127.0.0.1", broker.port), timeout=timeout_s) as sock:
        sock.settimeout(timeout_s)
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read(sock, 4))[0]
        data = _read(sock, size)
    # Response header v1: correlation id, empty tagged fields.
    assert struct.unpack_from(">i", data)[0] == 7 and data[4] == 0
    response, _ = entity_reader(load_response_schema(api_key, version))(memoryview(data), 5)
    return response


def _read(sock: socket.socket, count: int) -> bytes:
    chunks = []
    while count:
        chunk = sock.recv(count)
        assert chunk, "the broker closed the connection"
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def fetch_error(broker, current_leader_epoch: int, *, replica_id: int = -1) -> int:
    m = _module(1, 12)
    request = m.FetchRequest(
        cluster_id=None, replica_id=replica_id, max_wait=datetime.timedelta(0), min_bytes=0,
        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(m.FetchTopic(topic=TOPIC, partitions=(m.FetchPartition(
            partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=0,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=(), rack_id="")
    response = call(broker, 1, 12, request)
    return int(response.responses[0].partitions[0].error_code)


def list_offsets(broker, current_leader_epoch: int):
    m = _module(2, 6)
    request = m.ListOffsetsRequest(
        replica_id=-1, isolation_level=0, topics=(m.ListOffsetsTopic(name=TOPIC, partitions=(
            m.ListOffsetsPartition(partition_index=0, current_leader_epoch=current_leader_epoch,
                                   timestamp=-1),)),))
    return call(broker, 2, 6, request).topics[0].partitions[0]


def offset_for_leader_epoch(broker, current_leader_epoch: int, leader_epoch: int):
    m = _module(23, 4)
    request = m.OffsetForLeaderEpochRequest(
        replica_id=-1, topics=(m.OffsetForLeaderTopic(topic=TOPIC, partitions=(
            m.OffsetForLeaderPartition(partition=0, current_leader_epoch=current_leader_epoch,
                                       leader_epoch=leader_epoch),)),))
    return call(broker, 23, 4, request).topics[0].partitions[0]


def produce(broker, value: bytes, *, acks: int = -1, timeout_ms: int = 10000):
    """A raw Produce v9 of one record; the partition's response."""
    batch = get_backend("native").encode_batch([value], timestamps_ms=[int(time.time() * 1000)])
    m = _module(0, 9)
    request = m.ProduceRequest(
        transactional_id=None, acks=acks, timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(m.TopicProduceData(name=TOPIC, partition_data=(
            m.PartitionProduceData(index=0, records=batch),)),))
    return call(broker, 0, 9, request, timeout_s=timeout_ms / 1000 + 10).responses[0] \
        .partition_responses[0]


def bump_epoch(cluster: Cluster, zk_client, leader: int, *, leader_epoch: int | None = None,
               new_leader: int | None = None) -> int:
    """Write the partition's state as a controller would, with the leader epoch one higher
    (or ``leader_epoch``) and the same ISR; returns the epoch written."""
    state = zk_client.partition_states([TP])[TP]
    epoch = state.leader_epoch + 1 if leader_epoch is None else leader_epoch
    zk_client.update_isr(TP, zk_data.PartitionState(
        leader=leader if new_leader is None else new_leader, leader_epoch=epoch, isr=state.isr,
        controller_epoch=state.controller_epoch), state.zk_version)
    return epoch


@pytest.mark.parametrize("pair", [NO_TEST_BREAKS, SKIP_EPOCH_CHECK], indirect=True,
                         ids=["correct", "skip_epoch_check"])
def test_current_leader_epoch_is_fenced_on_the_leader(pair, zk_client):
    """Fetch, ListOffsets and OffsetForLeaderEpoch on the leader: an older CurrentLeaderEpoch
    is FENCED_LEADER_EPOCH (74), a newer one UNKNOWN_LEADER_EPOCH (75), the current one or
    -1 is served; the follower answers NOT_LEADER_OR_FOLLOWER (6). With the negative control
    ``skip_epoch_check`` the stale epoch is served."""
    cluster, leader, follower = pair
    assert produce(cluster.brokers[leader], b"one").error_code == 0
    epoch = bump_epoch(cluster, zk_client, leader)
    wait_until(lambda: cluster.rm(leader).partitions[TP].leader_epoch == epoch,
               "the leader to take the new epoch")
    broker = cluster.brokers[leader]
    if cluster.test_breaks.enabled("skip_epoch_check"):
        assert fetch_error(broker, epoch - 1) == 0
        assert int(list_offsets(broker, epoch - 1).error_code) == 0
        return
    assert fetch_error(broker, epoch - 1) == 74
    assert fetch_error(broker, epoch + 1) == 75
    assert fetch_error(broker, epoch) == 0 and fetch_error(broker, -1) == 0
    assert fetch_error(cluster.brokers[follower], epoch) == 6
    assert int(list_offsets(broker, epoch - 1).error_code) == 74
    assert int(list_offsets(broker, epoch + 1).error_code) == 75
    latest = list_offsets(broker, epoch)
    assert (int(latest.error_code), latest.offset, latest.leader_epoch) == (0, 1, epoch)
    assert int(offset_for_leader_epoch(broker, epoch - 1, 0).error_code) == 74
    assert int(offset_for_leader_epoch(broker, epoch + 1, 0).error_code) == 75
    # Epoch 0 ended where the new epoch began: after the one record.
    answer = offset_for_leader_epoch(broker, epoch, 0)
    assert (int(answer.error_code), answer.leader_epoch, answer.end_offset) == (0, 0, 1)
    assert int(offset_for_leader_epoch(cluster.brokers[follower], epoch, 0).error_code) == 6


def test_a_new_epoch_with_the_same_leader_reaches_the_fetcher_and_an_older_one_is_ignored(
        pair, zk_client):
    """KAFKA-7164: the leader stays, the epoch moves: the follower's fetcher takes the new
    epoch (and truncates by it), the leader asserts it in its epoch cache. A state with an
    older epoch written afterwards (a deposed writer) changes nothing on either broker."""
    cluster, leader, follower = pair
    epoch = bump_epoch(cluster, zk_client, leader)
    def fetching_at_new_epoch():
        state = cluster.rm(follower).fetcher.fetch_state(TP)
        return state is not None and state.leader_epoch == epoch
    wait_until(fetching_at_new_epoch, "the follower's fetcher to move to the new epoch")
    assert cluster.rm(follower).partitions[TP].leader == leader
    assert cluster.brokers[leader].store.topic(TOPIC).log(0).latest_epoch == epoch

    bump_epoch(cluster, zk_client, leader, leader_epoch=epoch - 1, new_leader=follower)
    # The watch delivers it; both brokers must keep the newer epoch and roles.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        assert cluster.rm(leader).partitions[TP].is_leader
        assert not cluster.rm(follower).partitions[TP].is_leader
        assert cluster.rm(follower).partitions[TP].leader_epoch == epoch
        time.sleep(0.1)
    assert produce(cluster.brokers[leader], b"still").error_code == 0


def _stop_following(cluster: Cluster, follower: int) -> None:
    rm = cluster.rm(follower)
    # The follower must have taken the partition first (the ISR read from ZooKeeper can be
    # the controller's initial one, before the follower's fetcher got it): removing it
    # earlier would let the follower start fetching afterwards.
    wait_until(lambda: rm.fetcher.fetch_state(TP) is not None, "the follower fetches")
    cluster.call(follower, lambda: rm.fetcher.remove_partitions([TP]))


def _follow_again(cluster: Cluster, follower: int, leader: int) -> None:
    rm = cluster.rm(follower)
    replica = rm.partitions[TP]
    cluster.call(follower, lambda: rm.fetcher.add_partitions({TP: FetchTarget(
        leader_id=leader, leader_epoch=replica.leader_epoch, log=replica.log,
        topic_id=replica.topic_id)}))


@pytest.mark.parametrize("pair", [NO_TEST_BREAKS, ACK_ON_APPEND], indirect=True,
                         ids=["correct", "ack_on_append"])
def test_acks_all_waits_for_the_isr_and_ack_on_append_does_not(pair):
    """acks=-1 waits for the high watermark: with the ISR follower not fetching, the produce
    times out (REQUEST_TIMED_OUT, 7) with its record appended above the high watermark; with
    the negative control ``ack_on_append`` the same produce is answered at once, though
    nothing is committed. Once the follower fetches again the high watermark passes the
    record."""
    cluster, leader, follower = pair
    _stop_following(cluster, follower)
    log = cluster.brokers[leader].store.topic(TOPIC).log(0)
    if cluster.test_breaks.enabled("ack_on_append"):
        answer = produce(cluster.brokers[leader], b"acked-early", timeout_ms=30000)
        assert (int(answer.error_code), answer.base_offset) == (0, 0)
    else:
        answer = produce(cluster.brokers[leader], b"waits", timeout_ms=300)
        assert int(answer.error_code) == 7
    assert (log.end_offset, log.high_watermark) == (1, 0)  # appended, not committed

    _follow_again(cluster, follower, leader)
    wait_until(lambda: log.high_watermark == 1, "the high watermark to pass the record")


def test_isr_shrink_while_waiting_is_not_enough_replicas_after_append(tmp_path, zk_connect):
    """min.insync.replicas=2, RF 2: an acks=-1 produce waiting while its follower stopped
    fetching is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) when the leader drops the
    follower from the ISR (after replica.lag.time.max.ms): the record is committed then
    (ISR of one), and the next acks=-1 produce is NOT_ENOUGH_REPLICAS (19)."""
    cluster = Cluster(tmp_path, zk_connect, size=2, **{"replica.lag.time.max.ms": 1000})
    try:
        wait_until(lambda: all(len(cluster.rm(b).live_brokers) == 2 for b in cluster.brokers),
                   "both brokers to see each other")
        create_topic(cluster, TOPIC, replication_factor=2,
                     config={"min.insync.replicas": "2"})
        leader = cluster.wait_for_isr(TP, 2)
        follower = next(b for b in cluster.brokers if b != leader)
        _stop_following(cluster, follower)
        log = cluster.brokers[leader].store.topic(TOPIC).log(0)
        answer = produce(cluster.brokers[leader], b"shrunk", timeout_ms=20000)
        assert int(answer.error_code) == 20
        assert cluster.rm(leader).partitions[TP].isr == (leader,)
        assert log.high_watermark == 1  # written and committed
        wait_until(lambda: zk_client_state_isr(cluster, leader) == (leader,),
                   "the shrunk ISR to be read back from ZooKeeper")
        answer = produce(cluster.brokers[leader], b"refused")
        assert int(answer.error_code) == 19 and log.end_offset == 1
    finally:
        cluster.close()


def zk_client_state_isr(cluster: Cluster, broker_id: int) -> tuple:
    """The ISR the broker's own ZooKeeper view holds for the partition."""
    return tuple(cluster.rm(broker_id).states[TP].isr)


def test_a_corrupt_znode_is_skipped_and_the_rest_of_the_cluster_still_served(pair, zk_client):
    """Bad bytes from ZooKeeper (a topic assignment that is not JSON, a partition state that
    is not JSON) are logged and left out: the brokers keep their other topics, take new ones
    and keep serving them (never a crash or a stalled metadata loop)."""
    cluster, leader, follower = pair
    zk_client.create_recursive(zk_data.topic_path("garbled"), b"{not json")
    create_topic(cluster, "after", replication_factor=2)
    after = TopicPartition("after", 0)
    after_leader = cluster.wait_for_isr(after, 2)
    assert "garbled" not in cluster.rm(leader).assignments
    # Corrupt the first topic's state: that partition's updates stop, the others go on.
    path = zk_data.partition_state_path(TP)
    _data, version = zk_client.get_data_and_version(path)
    zk_client.conditional_update_path(path, b"\xff\xfe garbage", version)
    state = zk_client.partition_states([after])[after]
    zk_client.update_isr(after, zk_data.PartitionState(
        leader=after_leader, leader_epoch=state.leader_epoch + 1, isr=state.isr,
        controller_epoch=state.controller_epoch), state.zk_version)
    wait_until(lambda: all(cluster.rm(b).partitions[after].leader_epoch == state.leader_epoch + 1
                           for b in cluster.brokers), "the good partition's new epoch")
    assert produce(cluster.brokers[leader], b"still served").error_code == 0


def test_producer_ids_are_unique_over_the_cluster(pair, zk_client):
    """InitProducerId on either broker hands out ids from blocks claimed in ZooKeeper
    (``/latest_producer_id_block``, Kafka's ZkProducerIdManager): two brokers never give the
    same id (an idempotent producer would be taken for another one after a leader change)."""
    cluster, leader, follower = pair
    m = _module(22, 4)

    def init_producer_id(broker_id: int) -> int:
        request = m.InitProducerIdRequest(transactional_id=None,
                                          transaction_timeout=datetime.timedelta(seconds=60),
                                          producer_id=-1, producer_epoch=-1)
        response = call(cluster.brokers[broker_id], 22, 4, request)
        assert int(response.error_code) == 0
        return int(response.producer_id)

    ids = [init_producer_id(b) for b in (leader, follower, leader, follower)]
    assert len(set(ids)) == 4
    blocks = {pid // 1000 for pid in ids}
    assert len(blocks) == 2  # one block claimed per broker
    data, _version = zk_client.get_data_and_version(zk_data.PRODUCER_ID_BLOCK_PATH)
    assert zk_data.decode_producer_id_block(data).end == 1999
