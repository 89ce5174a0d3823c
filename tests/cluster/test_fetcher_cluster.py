"""The replica fetcher against a cluster-mode leader: a real ``seglog`` broker with
``zookeeper.connect`` (the session's ZooKeeper) leads a partition assigned to replicas
``[0, 5]``; broker 5 is this test's :class:`ReplicaFetcherManager` and its own Log. The leader
answers Fetch with its replica id (reads to the LEO, ``DivergingEpoch``, follower fetch state
and ISR expansion), OffsetForLeaderEpoch from its epoch cache and ListOffsets as a replica.

Kafka's tests these follow: ``ReplicaFetcherTest.testReplicaFetcherThread`` (the follower's
log ends equal to the leader's), ``AbstractFetcherThreadTest.testDivergingEpochs`` /
``ReplicaFetcherThreadTest.shouldTruncateIfLeaderRepliesWithDivergingEpochNotKnownToFollower``
(KIP-279 through the Fetch response), ``testFollowerFetchOutOfRangeLow`` (the leader's log
start above the follower's end), ``testFencedFetch``. Waits are bounded; nothing asserts on
time.
"""

from __future__ import annotations

import asyncio
import filecmp
import os
import uuid

import pytest

import seglog
from seglog.cluster.fetcher import FETCHING, FetcherConfig, FetchTarget, ReplicaFetcherManager
from seglog.cluster.zk_data import TopicAssignment
from seglog.storage.log import Log
from seglog.types import TopicPartition

BACKENDS = ("native", "pure")
LEADER_ID = 0
FOLLOWER_ID = 5
TOPIC = "r"
TP = TopicPartition(TOPIC, 0)
CLUSTER_CONFIG = {
    "zookeeper.session.timeout.ms": 4000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 200,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
}
FAST = FetcherConfig(backoff_ms=50, fetch_wait_max_ms=100, request_timeout_ms=5000,
                     fetch_max_bytes=4096)  # small: many fetches for a few hundred records


async def _until(predicate, timeout_s: float = 20.0, what: str = "condition") -> None:
    """Wait (bounded) until ``predicate()`` is true; the blocking ones run in a thread."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.02)


def _run(coro, timeout_s: float = 40.0):
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


class Leader:
    """Broker 0 in cluster mode, leading ``r-0`` (replicas [0, 5])."""

    def __init__(self, tmp_path, zk_connect: str, zk_client):
        self.tmp_path = tmp_path
        self.zk_connect = zk_connect
        self.zk = zk_client
        self.broker: seglog.Broker | None = None
        self.start()
        zk_client.create_topic(TopicAssignment(TOPIC, uuid.uuid4(),
                                               {0: [LEADER_ID, FOLLOWER_ID]}), {})
        self.wait_leading()

    def start(self) -> None:
        self.broker = seglog.Broker(self.tmp_path / "leader", listen=("127.0.0.1", 0),
                                    config=dict(CLUSTER_CONFIG, **{
                                        "broker.id": LEADER_ID,
                                        "zookeeper.connect": self.zk_connect}))
        self.broker.start()

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
            self.broker = None

    def state(self):
        return self.zk.partition_states([TP]).get(TP)

    def wait_leading(self, above_epoch: int = -1, timeout_s: float = 20.0) -> int:
        """The leader epoch once broker 0 leads ``r-0`` in an epoch above ``above_epoch``
        and its log is there (polled, bounded)."""
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = self.state()
            if state is not None and state.leader == LEADER_ID and \
                    state.leader_epoch > above_epoch:
                try:
                    log = self.log
                except Exception:
                    log = None
                if log is not None and log.leader_epoch == state.leader_epoch:
                    return state.leader_epoch
            time.sleep(0.05)
        raise AssertionError(f"broker {LEADER_ID} does not lead {TP} above epoch {above_epoch}")

    @property
    def log(self) -> Log:
        return self.broker.store.topic(TOPIC).log(0)

    @property
    def address(self):
        return ("127.0.0.1", self.broker.port) if self.broker is not None else None

    def produce(self, count: int, *, start: int = 0, compression: str | None = None) -> None:
        """``count`` records through a real client (kafka-python, acks=1), several batches."""
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.broker.bootstrap, acks=1,
                                 linger_ms=5, batch_size=2048,
                                 compression_type=compression, request_timeout_ms=10000)
        try:
            futures = [producer.send(TOPIC, key=b"k%d" % (i % 7), value=b"value-%06d" % i,
                                     partition=0) for i in range(start, start + count)]
            producer.flush(timeout=20)
            for future in futures:
                future.get(timeout=20)
        finally:
            producer.close(timeout=10)


@pytest.fixture
def leader(tmp_path, zk_connect, zk_client):
    leader = Leader(tmp_path, zk_connect, zk_client)
    try:
        yield leader
    finally:
        leader.stop()


def _segment_files(path) -> list[str]:
    return sorted(name for name in os.listdir(path) if name.endswith(".log"))


def _assert_same_files(leader_dir, follower_dir) -> None:
    names = _segment_files(leader_dir)
    assert names and names == _segment_files(follower_dir)
    for name in names + ["leader-epoch-checkpoint"]:
        assert filecmp.cmp(os.path.join(leader_dir, name), os.path.join(follower_dir, name),
                           shallow=False), name


@pytest.mark.parametrize("backend", BACKENDS)
def test_follower_copies_the_leaders_log_byte_for_byte(leader, tmp_path, backend):
    """ReplicaFetcherTest.testReplicaFetcherThread: records produced to the leader (a real
    client, plain and gzip batches) reach the follower's log; its segment files and epoch
    checkpoint end byte-identical to the leader's, its high watermark follows the leader's,
    and the leader counts it in sync (ISR [0, 5] in ZooKeeper)."""
    leader.produce(300)
    leader.produce(200, start=300, compression="gzip")
    epoch = leader.state().leader_epoch
    follower = Log.open(tmp_path / "follower" / "r-0", backend=backend,
                        auto_high_watermark=False)
    high_watermarks = []

    async def scenario():
        manager = ReplicaFetcherManager(
            broker_id=FOLLOWER_ID, loop=asyncio.get_running_loop(),
            resolve_broker=lambda broker_id: leader.address if broker_id == LEADER_ID
            else None, config=FAST,
            on_high_watermark=lambda tp, hw: high_watermarks.append((tp, hw)))
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, epoch, follower)})
            await _until(lambda: follower.end_offset == leader.log.end_offset == 500,
                         what="the follower's log end")
            await _until(lambda: follower.high_watermark == 500, what="the follower's HW")
            await _until(lambda: FOLLOWER_ID in leader.state().isr, what="ISR expansion")
            # More records while the follower is caught up: the leader's long poll.
            leader.produce(50, start=500)
            await _until(lambda: follower.high_watermark == 550, what="the next records")
            assert manager.fetch_state(TP).state == FETCHING
            assert manager.failed_partitions == frozenset()
            assert manager.request_counts["offsets_for_leader_epoch"] == 0
            assert manager.request_counts["fetch"] > 5  # 4 KiB per partition fetch
            # One fetch session (KIP-227): a full request, then incremental ones.
            assert manager.request_counts["fetch_full"] == 1
            assert manager.request_counts["fetch_incremental"] == \
                manager.request_counts["fetch"] - 1
        finally:
            await manager.close()

    try:
        _run(scenario())
        assert high_watermarks and high_watermarks[-1] == (TP, 550)
        assert [hw for _tp, hw in high_watermarks] == sorted(hw for _tp, hw in high_watermarks)
        assert follower.latest_epoch == epoch
        assert follower.start_offset == 0 and follower.end_offset == 550
        follower.flush()
        leader.log.flush()
        _assert_same_files(leader.log.dir_path, follower.dir_path)
    finally:
        follower.close()


def _bump_epoch(leader: Leader) -> int:
    """The follower (broker 5, in the ISR) registers in ZooKeeper and goes away: the controller
    removes it from the ISR with a new leader epoch (R§2.2), which broker 0 takes up
    (``become_leader``: ``(epoch, LEO)`` in its cache). Returns the new epoch."""
    from seglog.cluster.zk_client import KafkaZkClient
    from seglog.cluster.zk_data import BrokerRegistration

    import time

    before = leader.state()
    assert FOLLOWER_ID in before.isr
    replica_manager = leader.broker.state.cluster
    for _attempt in range(5):
        session = KafkaZkClient(leader.zk_connect, session_timeout_ms=4000)
        session.start()
        try:
            session.register_broker(BrokerRegistration(FOLLOWER_ID, "127.0.0.1", 9))
            # Seen live by broker 0 (its controller watches the same znode); a registration
            # that comes and goes before the controller reads the children is no event, so
            # the whole step is retried below.
            deadline = time.monotonic() + 10
            while FOLLOWER_ID not in replica_manager.live_brokers:
                assert time.monotonic() < deadline, "broker 5 never seen live"
                time.sleep(0.02)
        finally:
            session.close()
        try:
            return leader.wait_leading(above_epoch=before.leader_epoch, timeout_s=4)
        except AssertionError:
            continue
    raise AssertionError("the controller never removed broker 5 from the ISR")


@pytest.mark.parametrize("truncation_on_fetch", [True, False],
                         ids=["diverging-epoch", "offsets-for-leader-epoch"])
def test_divergence_is_cut_then_the_leaders_records_copied(leader, tmp_path,
                                                            truncation_on_fetch):
    """AbstractFetcherThreadTest.testDivergingEpochs / ReplicaFetcherThreadTest
    .shouldTruncateIfLeaderRepliesWithDivergingEpochNotKnownToFollower (KIP-279), and with
    truncation on fetch off (Kafka before IBP 2.7) .shouldTruncateToOffsetSpecifiedInEpoch
    OffsetResponse. The follower copied 20 records of epoch ``e``; the leader moved to
    ``e + 2`` (two ISR changes; its empty ``e + 1`` left its cache, KIP-279), while the
    follower holds 5 records of an epoch ``e + 1`` the leader never had (it led briefly). Then
    the leader takes 10 more. First the follower at the stale epoch ``e`` is fenced
    (testFencedFetch: failed, untouched); at ``e + 2`` the leader says where the logs part
    (DivergingEpoch (e, 20), or OffsetsForLeaderEpoch's answer for ``e + 1``), the follower
    cuts its 5 records and copies the leader's 10: the logs end byte-identical."""
    leader.produce(20)
    epoch = leader.state().leader_epoch
    follower = Log.open(tmp_path / "follower" / "r-0", auto_high_watermark=False)
    config = FetcherConfig(backoff_ms=50, fetch_wait_max_ms=100, request_timeout_ms=5000,
                           truncation_on_fetch=truncation_on_fetch)

    async def copy(expected_end: int, leader_epoch: int, *, in_isr: bool = False,
                   stale_epoch: int | None = None):
        manager = ReplicaFetcherManager(
            broker_id=FOLLOWER_ID, loop=asyncio.get_running_loop(),
            resolve_broker=lambda broker_id: leader.address, config=config)
        try:
            if stale_epoch is not None:
                end = follower.end_offset
                manager.add_partitions({TP: FetchTarget(LEADER_ID, stale_epoch, follower)})
                await _until(lambda: TP in manager.failed_partitions, what="fencing")
                assert manager.fetch_state(TP) is None and follower.end_offset == end
            manager.add_partitions({TP: FetchTarget(LEADER_ID, leader_epoch, follower)})
            assert manager.failed_partitions == frozenset()
            await _until(lambda: follower.end_offset == expected_end
                         and follower.high_watermark == expected_end, what="the copy")
            if in_isr:
                await _until(lambda: FOLLOWER_ID in leader.state().isr, what="ISR expansion")
            return manager.request_counts
        finally:
            await manager.close()

    try:
        _run(copy(20, epoch, in_isr=True))
        middle = _bump_epoch(leader)
        _run(copy(20, middle, in_isr=True))
        new_epoch = _bump_epoch(leader)
        assert new_epoch >= epoch + 2
        assert [e.epoch for e in leader.log.leader_epoch_cache.entries] == [epoch, new_epoch]
        # The follower's own epoch e + 1: records the leader never gets.
        follower.become_leader(epoch + 1)
        for i in range(5):
            follower.append(b"lost-%d" % i)
        follower.become_follower()
        assert follower.end_offset == 25 and follower.latest_epoch == epoch + 1
        leader.produce(10, start=20)
        counts = _run(copy(30, new_epoch, stale_epoch=epoch))
        # The Fetch said where to cut; or OffsetsForLeaderEpoch did: one request fenced at
        # epoch e, then one round at e + 2 (the leader answered (e, 20) for e + 1; the
        # follower knows e: complete).
        assert counts["offsets_for_leader_epoch"] == (0 if truncation_on_fetch else 2)
        assert [r.value for r in follower.records(start=20, max_offset=30)] == \
            [b"value-%06d" % i for i in range(20, 30)]
        assert follower.end_offset_for_epoch(epoch + 1) == (epoch, 20)
        follower.flush()
        leader.log.flush()
        _assert_same_files(leader.log.dir_path, follower.dir_path)
    finally:
        follower.close()


def test_out_of_range_below_the_leaders_log_start(leader, tmp_path):
    """AbstractFetcherThreadTest.testFollowerFetchOutOfRangeLow: the leader deleted records
    below 40 (DeleteRecords) before an empty follower first fetched: OFFSET_OUT_OF_RANGE,
    ListOffsets (latest, then earliest), the follower restarts its log at 40 and copies from
    there; then its log start follows the leader's to 55."""
    leader.produce(60)
    assert leader.log.delete_records_before(40) == 40
    epoch = leader.state().leader_epoch
    follower = Log.open(tmp_path / "follower" / "r-0", auto_high_watermark=False)

    async def scenario():
        manager = ReplicaFetcherManager(
            broker_id=FOLLOWER_ID, loop=asyncio.get_running_loop(),
            resolve_broker=lambda broker_id: leader.address, config=FAST)
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, epoch, follower)})
            await _until(lambda: follower.end_offset == 60 and follower.high_watermark == 60,
                         what="the copy")
            assert manager.request_counts["list_offsets"] == 2
            assert follower.start_offset == 40
            # The leader's log start moves on (DeleteRecords): the follower's follows it
            # (ReplicaFetcherThread.processPartitionData, maybeIncrementLogStartOffset).
            assert leader.log.delete_records_before(55) == 55
            await _until(lambda: follower.start_offset == 55, what="the log start")
            assert follower.end_offset == 60
        finally:
            await manager.close()

    try:
        _run(scenario())
        assert [r.value for r in follower.records(start=55, max_offset=60)] == \
            [b"value-%06d" % i for i in range(55, 60)]
    finally:
        follower.close()


def test_corrupt_records_are_retried_and_nothing_appended(leader, tmp_path):
    """AbstractFetcherThreadTest.testCorruptMessage: a batch whose bytes no longer match its
    CRC (flipped on the leader's disk; a leader serves fetches unverified) is refused by the
    follower's append, logged, and the partition retried after the back-off, never failed;
    nothing is appended meanwhile. Once the byte is back the follower copies everything."""
    leader.produce(10)
    epoch = leader.state().leader_epoch
    segment = os.path.join(leader.log.dir_path, _segment_files(leader.log.dir_path)[0])
    position = 70  # inside the first batch's records (after its 61-byte header)
    with open(segment, "r+b") as f:
        f.seek(position)
        original = f.read(1)
        f.seek(position)
        f.write(bytes([original[0] ^ 0xFF]))
    follower = Log.open(tmp_path / "follower" / "r-0", auto_high_watermark=False)

    async def scenario():
        manager = ReplicaFetcherManager(
            broker_id=FOLLOWER_ID, loop=asyncio.get_running_loop(),
            resolve_broker=lambda broker_id: leader.address, config=FAST)
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, epoch, follower)})
            await _until(lambda: manager.request_counts["fetch"] >= 4, what="retries")
            assert follower.end_offset == 0 and manager.failed_partitions == frozenset()
            assert manager.fetch_state(TP).state == FETCHING
            with open(segment, "r+b") as f:
                f.seek(position)
                f.write(original)
            await _until(lambda: follower.end_offset == 10 and follower.high_watermark == 10,
                         what="the copy")
        finally:
            await manager.close()

    try:
        _run(scenario())
        follower.flush()
        leader.log.flush()
        _assert_same_files(leader.log.dir_path, follower.dir_path)
    finally:
        follower.close()


def test_two_brokers_replicate_and_fail_over(tmp_path, zk_connect, zk_client):
    """The fetcher inside a cluster broker (the replica manager's follower side):
    ReplicationTest / LogRecoveryTest in small. Brokers 0 and 1 replicate ``r-0``
    (replicas [0, 1]); the follower's files end byte-identical to the leader's. Broker 0
    stops: broker 1 leads in a new epoch and takes more records; broker 0 comes back as its
    follower, truncates by epoch (nothing to cut) and catches up: identical again."""
    from kafka import KafkaProducer

    brokers: dict[int, seglog.Broker] = {}

    def start(broker_id: int) -> None:
        brokers[broker_id] = seglog.Broker(
            tmp_path / f"broker-{broker_id}", listen=("127.0.0.1", 0),
            config=dict(CLUSTER_CONFIG, **{"broker.id": broker_id,
                                           "zookeeper.connect": zk_connect}))
        brokers[broker_id].start()

    def log_of(broker_id: int) -> Log:
        return brokers[broker_id].store.topic(TOPIC).log(0)

    def produce(broker_id: int, start_index: int, count: int) -> None:
        producer = KafkaProducer(bootstrap_servers=brokers[broker_id].bootstrap, acks="all",
                                 linger_ms=5, batch_size=4096, request_timeout_ms=10000)
        try:
            futures = [producer.send(TOPIC, value=b"value-%06d" % i, partition=0)
                       for i in range(start_index, start_index + count)]
            producer.flush(timeout=20)
            for future in futures:
                future.get(timeout=20)
        finally:
            producer.close(timeout=10)

    def wait(condition, what: str, timeout_s: float = 20.0) -> None:
        import time

        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)

    def in_sync(expected_end: int) -> bool:
        try:
            logs = [log_of(0), log_of(1)]
        except Exception:
            return False
        return all(log.end_offset == expected_end and log.high_watermark == expected_end
                   for log in logs)

    def same_files() -> None:
        for broker_id in (0, 1):
            log_of(broker_id).flush()
        _assert_same_files(log_of(0).dir_path, log_of(1).dir_path)

    try:
        start(0)
        start(1)
        zk_client.create_topic(TopicAssignment(TOPIC, uuid.uuid4(), {0: [0, 1]}), {})
        wait(lambda: (s := zk_client.partition_states([TP]).get(TP)) is not None
             and s.leader == 0 and set(s.isr) == {0, 1}, "leader 0 with ISR [0, 1]")
        first_epoch = zk_client.partition_states([TP])[TP].leader_epoch
        produce(0, 0, 200)
        wait(lambda: in_sync(200), "the follower's copy")
        same_files()
        brokers.pop(0).stop()
        wait(lambda: (s := zk_client.partition_states([TP]).get(TP)) is not None
             and s.leader == 1 and s.leader_epoch > first_epoch, "broker 1 leading")
        produce(1, 200, 50)
        start(0)
        wait(lambda: in_sync(250), "broker 0 caught up")
        same_files()
        assert log_of(0).latest_epoch == log_of(1).latest_epoch > first_epoch
    finally:
        for broker in brokers.values():
            broker.stop()


def test_a_log_moved_under_the_fetcher_fails_the_partition(leader, tmp_path):
    """ReplicaFetcherThread.processPartitionData's "Offset mismatch" (IllegalStateException,
    then markPartitionFailed): something else appended to the follower's log while a fetch
    was out; the answer is not appended, the partition is marked failed and left alone until
    it is added again, which starts over from the log as it is."""
    leader.produce(10)
    epoch = leader.state().leader_epoch
    follower = Log.open(tmp_path / "follower" / "r-0", auto_high_watermark=False)

    async def scenario():
        manager = ReplicaFetcherManager(
            broker_id=FOLLOWER_ID, loop=asyncio.get_running_loop(),
            resolve_broker=lambda broker_id: leader.address, config=FAST)
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, epoch, follower)})
            await _until(lambda: follower.end_offset == 10, what="the copy")
            follower.append(b"not from the leader")  # the fetcher's offset is now stale
            await asyncio.to_thread(leader.produce, 5, start=10)
            await _until(lambda: TP in manager.failed_partitions, what="the failure")
            assert manager.fetch_state(TP) is None and follower.end_offset == 11
            follower.truncate_to(10)
            manager.add_partitions({TP: FetchTarget(LEADER_ID, epoch, follower)})
            await _until(lambda: follower.end_offset == 15 and follower.high_watermark == 15,
                         what="the copy after re-adding")
        finally:
            await manager.close()

    try:
        _run(scenario())
    finally:
        follower.close()


class HoldingProxy:
    """A TCP relay between the fetcher and the real leader that can hold the leader's answers
    to one API key until released: it puts a leadership change exactly between a request and
    its answer. It forwards bytes unchanged; it decides nothing."""

    def __init__(self, upstream):
        self.upstream = upstream  # () -> (host, port)
        self.hold_api_key: int | None = None
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.delivered: list[int] = []  # API keys of the answers passed on
        self.server = None

    async def start(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return ("127.0.0.1", self.server.sockets[0].getsockname()[1])

    async def close(self):
        self.server.close()
        await asyncio.wait_for(self.server.wait_closed(), 10)

    async def _serve(self, client_reader, client_writer):
        import struct

        host, port = self.upstream()
        up_reader, up_writer = await asyncio.open_connection(host, port)
        try:
            while True:
                size = struct.unpack(">i", await client_reader.readexactly(4))[0]
                frame = await client_reader.readexactly(size)
                api_key = struct.unpack(">h", frame[:2])[0]
                up_writer.write(struct.pack(">i", size) + frame)
                await up_writer.drain()
                size = struct.unpack(">i", await up_reader.readexactly(4))[0]
                answer = await up_reader.readexactly(size)
                if api_key == self.hold_api_key:
                    self.held.set()
                    await self.release.wait()
                client_writer.write(struct.pack(">i", size) + answer)
                await client_writer.drain()
                self.delivered.append(api_key)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            up_writer.close()
            client_writer.close()


def test_epoch_change_while_offsets_for_leader_epoch_is_out(leader, tmp_path):
    """AbstractFetcherThreadTest.testLeaderEpochChangeDuringSuccessfulFetchEpochsFromLeader:
    the follower (30 records of epoch e) asks where epoch e ends; before the answer (e, 20)
    arrives it is told of another epoch. The answer is for the old state and is dropped: the
    log is not cut until the question is asked again at the right epoch."""
    leader.produce(20)
    epoch = leader.state().leader_epoch
    follower = _epoch_log(tmp_path / "follower" / "r-0", epoch, 30)
    config = FetcherConfig(backoff_ms=50, fetch_wait_max_ms=100, request_timeout_ms=5000,
                           truncation_on_fetch=False)

    async def scenario():
        proxy = HoldingProxy(lambda: leader.address)
        address = await proxy.start()
        proxy.hold_api_key = 23  # OffsetForLeaderEpoch
        manager = ReplicaFetcherManager(broker_id=FOLLOWER_ID, loop=asyncio.get_running_loop(),
                                        resolve_broker=lambda broker_id: address, config=config)
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, epoch, follower)})
            await asyncio.wait_for(proxy.held.wait(), 10)
            # A newer epoch than the leader knows: its own question gets UNKNOWN_LEADER_EPOCH.
            manager.add_partitions({TP: FetchTarget(LEADER_ID, epoch + 1, follower)})
            proxy.hold_api_key = None
            proxy.release.set()
            await _until(lambda: proxy.delivered.count(23) >= 2, what="both answers")
            assert follower.end_offset == 30  # the first answer (e, 20) was not applied
            assert manager.fetch_state(TP).state == "truncating"
            manager.add_partitions({TP: FetchTarget(LEADER_ID, epoch, follower)})
            await _until(lambda: follower.end_offset == 20, what="the cut at the right epoch")
        finally:
            await manager.close()
            await proxy.close()

    try:
        _run(scenario())
    finally:
        follower.close()


def test_partition_removed_while_a_fetch_is_out(leader, tmp_path):
    """AbstractFetcherThreadTest.testTruncationOnFetchSkippedIfPartitionRemoved / the
    removePartitions contract: the leader's answer carrying records for ``r-0`` and ``s-0``
    arrives after ``r-0`` was removed (this broker became its leader, say): ``s-0``'s records
    are appended from that very answer, ``r-0``'s are not."""
    other = TopicPartition("s", 0)
    leader.zk.create_topic(TopicAssignment("s", uuid.uuid4(), {0: [LEADER_ID, FOLLOWER_ID]}),
                           {})
    import time

    deadline = time.monotonic() + 20
    while True:
        state = leader.zk.partition_states([other]).get(other)
        try:
            other_log = leader.broker.store.topic("s").log(0)
        except Exception:
            other_log = None
        if state is not None and state.leader == LEADER_ID and other_log is not None \
                and other_log.leader_epoch == state.leader_epoch:
            break
        assert time.monotonic() < deadline, "s-0 never led by broker 0"
        time.sleep(0.05)
    leader.produce(20)
    for i in range(7):
        other_log.append(b"s-%d" % i)
    epoch = leader.state().leader_epoch
    follower = Log.open(tmp_path / "follower" / "r-0", auto_high_watermark=False)
    other_follower = Log.open(tmp_path / "follower" / "s-0", auto_high_watermark=False)

    async def scenario():
        proxy = HoldingProxy(lambda: leader.address)
        address = await proxy.start()
        proxy.hold_api_key = 1  # Fetch
        manager = ReplicaFetcherManager(broker_id=FOLLOWER_ID, loop=asyncio.get_running_loop(),
                                        resolve_broker=lambda broker_id: address, config=FAST)
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, epoch, follower),
                                    other: FetchTarget(LEADER_ID, state.leader_epoch,
                                                       other_follower)})
            await asyncio.wait_for(proxy.held.wait(), 10)
            manager.remove_partitions([TP])
            proxy.hold_api_key = None
            proxy.release.set()
            await _until(lambda: other_follower.end_offset == 7, what="s-0's records")
            assert proxy.delivered.count(1) >= 1
            assert follower.end_offset == 0 and follower.high_watermark == 0
            assert manager.partitions == {other}
        finally:
            await manager.close()
            await proxy.close()

    try:
        _run(scenario())
    finally:
        follower.close()
        other_follower.close()


def _epoch_log(path, epoch: int, count: int) -> Log:
    """A follower's log of ``count`` records of ``epoch`` that this broker wrote as leader."""
    log = Log.open(path, auto_high_watermark=False)
    log.become_leader(epoch)
    for i in range(count):
        log.append(b"value-%06d" % i if i < 20 else b"own-%d" % i)
    log.become_follower()
    return log


def test_follower_fetches_in_full_again_when_its_session_is_gone(leader, tmp_path):
    """Kafka's FetchSessionHandler: the leader forgets the follower's fetch session (as an
    eviction or a restart would), its next incremental fetch gets FETCH_SESSION_ID_NOT_FOUND
    and the follower fetches in full at once, in a new session; records keep coming."""
    leader.produce(100)
    epoch = leader.state().leader_epoch
    follower = Log.open(tmp_path / "follower" / "r-0", auto_high_watermark=False)
    state = leader.broker.state

    def sessions():
        return state.extensions["seglog.server.fetch_sessions"]

    def forget_every_session():
        for shard in sessions().shards:
            shard.sessions.clear()

    async def scenario():
        manager = ReplicaFetcherManager(
            broker_id=FOLLOWER_ID, loop=asyncio.get_running_loop(),
            resolve_broker=lambda broker_id: leader.address if broker_id == LEADER_ID
            else None, config=FAST)
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, epoch, follower)})
            await _until(lambda: follower.end_offset == 100, what="the follower's log end")
            await _until(lambda: manager.request_counts["fetch_incremental"] >= 2,
                         what="incremental fetches")
            assert manager.request_counts["fetch_full"] == 1
            errors_before = sessions().counts["error"]
            state.loop.call_soon_threadsafe(forget_every_session)
            await _until(lambda: manager.request_counts["fetch_full"] == 2,
                         what="a full fetch after the session was lost")
            assert sessions().counts["error"] == errors_before + 1
            leader.produce(50, start=100)
            await _until(lambda: follower.end_offset == 150, what="the next records")
            assert manager.failed_partitions == frozenset()
            assert manager.request_counts["fetch_full"] == 2
        finally:
            await manager.close()

    try:
        _run(scenario())
    finally:
        follower.close()
