"""The replica fetcher (seglog.cluster.fetcher) against a real broker over TCP.

Here the leader is a single-node ``seglog serve`` broker (``seglog_broker_factory``): it
answers OffsetForLeaderEpoch and ListOffsets for its partitions at leader epoch 0, and refuses
Fetch from a replica (no replication on a single node: UNKNOWN_LEADER_EPOCH), so these tests
cover truncation through OffsetsForLeaderEpoch, the error and back-off paths, connection
failures and the partitions' life cycle. The copy of a leader's log through Fetch is in
test_fetcher_cluster.py, against cluster-mode brokers.

Every test names the Kafka test (AbstractFetcherThreadTest, ReplicaFetcherThreadTest) it
follows. Waits are bounded (``_until``); nothing asserts on time.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from seglog.cluster import fetcher as fetcher_mod
from seglog.cluster.fetcher import FETCHING, TRUNCATING, FetcherConfig, FetchTarget, \
    ReplicaFetcherManager
from seglog.cluster.test_breaks import NO_TEST_BREAKS, TestBreaks
from seglog.storage.log import Log
from seglog.types import TopicPartition

BACKENDS = ("native", "pure")
TP = TopicPartition("t", 0)
LEADER_ID = 1
FOLLOWER_ID = 2
#: Short back-off so the retry paths run many times within a test.
FAST = FetcherConfig(backoff_ms=50, fetch_wait_max_ms=100, request_timeout_ms=5000,
                     truncation_on_fetch=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _until(predicate, timeout_s: float = 10.0, what: str = "condition") -> None:
    """Wait (bounded) until ``predicate()`` is true."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def _run(coro, timeout_s: float = 30.0):
    return asyncio.run(asyncio.wait_for(coro, timeout_s))


@pytest.fixture
def leader(seglog_broker_factory):
    """A single-node broker holding topic ``t`` (one partition, 6 records)."""
    broker = seglog_broker_factory()
    log = broker.store.create_topic("t", partitions=1).log(0)
    for i in range(6):
        log.append(b"leader-%d" % i)
    return broker


def _follower_log(path, backend: str, *, records: int, epochs=((0, 0),),
                  high_watermark: int = 0) -> Log:
    """A follower's replicated Log holding ``records`` records written under ``epochs``
    (``(epoch, first record index)``, ascending), as a former leader wrote them."""
    log = Log.open(path, backend=backend, auto_high_watermark=False)
    bounds = list(epochs) + [(None, records)]
    for (epoch, first), (_next, end) in zip(bounds, bounds[1:]):
        log.become_leader(epoch)
        for i in range(first, end):
            log.append(b"follower-%d" % i)
    log.become_follower()
    log.update_high_watermark(high_watermark)
    return log


def _manager(loop, port_of, *, config=FAST, on_high_watermark=None,
             test_breaks=NO_TEST_BREAKS) -> ReplicaFetcherManager:
    return ReplicaFetcherManager(broker_id=FOLLOWER_ID, loop=loop,
                                 resolve_broker=port_of, config=config,
                                 on_high_watermark=on_high_watermark, test_breaks=test_breaks)


@pytest.mark.parametrize("backend", BACKENDS)
def test_truncation_to_the_leaders_epoch_end(leader, tmp_path, backend):
    """AbstractFetcherThreadTest.testTruncation / ReplicaFetcherThreadTest
    .shouldTruncateToOffsetSpecifiedInEpochOffsetResponse: the follower holds 10 records of
    epoch 0, the leader's epoch 0 ends at 6: the follower cuts to 6, then fetches (which this
    leader refuses: UNKNOWN_LEADER_EPOCH, the partition backs off and retries,
    testUnknownLeaderEpochWhileFetching)."""
    log = _follower_log(tmp_path / "t-0", backend, records=10, high_watermark=4)
    moved = []

    async def scenario():
        manager = _manager(asyncio.get_running_loop(),
                           lambda broker_id: ("127.0.0.1", leader.port),
                           on_high_watermark=lambda tp, hw: moved.append((tp, hw)))
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, 0, log)})
            state = manager.fetch_state(TP)
            assert (state.state, state.fetch_offset) == (TRUNCATING, 4)  # at the HW
            await _until(lambda: manager.fetch_state(TP).state == FETCHING, what="truncation")
            assert log.end_offset == 6 and manager.fetch_state(TP).fetch_offset == 6
            # The refused fetch: delayed, retried, never failed, the log left as it is.
            await _until(lambda: manager.request_counts["fetch"] >= 3, what="retries")
            assert manager.failed_partitions == frozenset()
            assert log.end_offset == 6
        finally:
            await manager.close()

    try:
        _run(scenario())
        assert [r.value for r in log.records(start=0, max_offset=log.end_offset)] == \
            [b"follower-%d" % i for i in range(6)]
        assert log.end_offset_for_epoch(0) == (0, 6)
        assert moved == []  # the high watermark (4) was below the cut
    finally:
        log.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_asks_again_for_an_epoch_the_follower_never_saw(leader, tmp_path, backend):
    """ReplicaFetcherThreadTest.shouldFetchLeaderEpochSecondTimeIfLeaderRepliesWithEpochNot
    KnownToFollower (KIP-279): the follower's latest epoch is 3; the leader knows only epoch
    0 and answers (-1, -1) for 3 ... so the follower cuts to its high watermark
    (testTruncateToHighWatermarkIfLeaderEpochInfoNotAvailable). Then with the leader's
    answer for epoch 0 nothing more is cut."""
    log = _follower_log(tmp_path / "t-0", backend, records=9, epochs=((0, 0), (3, 5)),
                        high_watermark=7)
    moved = []

    async def scenario():
        manager = _manager(asyncio.get_running_loop(),
                           lambda broker_id: ("127.0.0.1", leader.port),
                           on_high_watermark=lambda tp, hw: moved.append(hw))
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, 0, log)})
            await _until(lambda: manager.fetch_state(TP).state == FETCHING, what="truncation")
        finally:
            await manager.close()

    try:
        _run(scenario())
        # Undefined end offset: Kafka truncates to the initial fetch offset, the HW (7).
        assert log.end_offset == 7
        assert log.latest_epoch == 3
        assert moved == []
    finally:
        log.close()


def test_unknown_leader_epoch_in_truncation_retries_until_a_new_epoch(leader, tmp_path):
    """AbstractFetcherThreadTest.testUnknownLeaderEpochInTruncation and
    testTruncationSkippedIfNoEpochChange: the follower believes the leader is at epoch 5,
    newer than the leader's 0: UNKNOWN_LEADER_EPOCH, backed off and retried, nothing cut;
    adding it again at the same epoch keeps its state; at epoch 0 it truncates."""
    log = _follower_log(tmp_path / "t-0", "native", records=10)

    async def scenario():
        manager = _manager(asyncio.get_running_loop(),
                           lambda broker_id: ("127.0.0.1", leader.port))
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, 5, log)})
            await _until(lambda: manager.fetch_state(TP).delayed_until is not None,
                         what="back-off")
            delayed = manager.fetch_state(TP)
            manager.add_partitions({TP: FetchTarget(LEADER_ID, 5, log)})
            assert manager.fetch_state(TP) is delayed  # same epoch: state kept
            await _until(lambda: manager.request_counts["offsets_for_leader_epoch"] >= 3,
                         what="retries")
            assert manager.fetch_state(TP).state == TRUNCATING and log.end_offset == 10
            assert manager.request_counts["fetch"] == 0
            manager.add_partitions({TP: FetchTarget(LEADER_ID, 0, log)})
            await _until(lambda: manager.fetch_state(TP).state == FETCHING, what="truncation")
            assert log.end_offset == 6
        finally:
            await manager.close()

    try:
        _run(scenario())
    finally:
        log.close()


def test_unreachable_and_unknown_leaders_back_off_then_recover(leader, tmp_path):
    """ReplicaFetcherThreadTest.shouldHandleExceptionFromBlockingSend /
    shouldPollIndefinitelyIfLeaderReturnsAnyException: the leader is first unknown
    (resolve_broker None), then refuses connections; every partition backs off and retries,
    and once the address is right the follower truncates."""
    log = _follower_log(tmp_path / "t-0", "native", records=10)
    dead_port = _free_port()
    addresses = iter([None, None, ("127.0.0.1", dead_port), ("127.0.0.1", dead_port)])
    asked = []

    def resolve(broker_id):
        asked.append(broker_id)
        return next(addresses, ("127.0.0.1", leader.port))

    async def scenario():
        manager = _manager(asyncio.get_running_loop(), resolve)
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, 0, log)})
            await _until(lambda: manager.fetch_state(TP).state == FETCHING, what="truncation")
            assert log.end_offset == 6
            assert len(asked) >= 5 and set(asked) == {LEADER_ID}
            assert manager.request_counts["connect"] == len(asked) - 2  # None: no connect
        finally:
            await manager.close()

    try:
        _run(scenario())
    finally:
        log.close()


def test_negative_control_truncate_to_hw(leader, tmp_path):
    """The negative control ``truncate_to_hw`` (R§3.7, Kafka before KIP-101): with epochs in
    the log and truncation on fetch, a new epoch normally starts fetching at the log end
    offset, cutting nothing before the leader says where the logs diverge; with the flag
    on, the follower cuts to its own high watermark at once, and a leader's answer cannot
    save the records above it."""
    kept = _follower_log(tmp_path / "kept", "native", records=10, high_watermark=3)
    cut = _follower_log(tmp_path / "cut", "native", records=10, high_watermark=3)
    config = FetcherConfig(backoff_ms=50, fetch_wait_max_ms=100, request_timeout_ms=5000)

    async def scenario(log, *, broken: bool):
        manager = _manager(asyncio.get_running_loop(),
                           lambda broker_id: ("127.0.0.1", leader.port), config=config,
                           test_breaks=TestBreaks.of("truncate_to_hw") if broken
                           else NO_TEST_BREAKS)
        try:
            manager.add_partitions({TP: FetchTarget(LEADER_ID, 0, log)})
            await _until(lambda: manager.fetch_state(TP).state == FETCHING, what="fetching")
            # The first fetch is refused by this leader (no replication): nothing appended.
            await _until(lambda: manager.request_counts["fetch"] >= 1, what="a fetch")
            assert manager.request_counts["offsets_for_leader_epoch"] == 0
        finally:
            await manager.close()

    try:
        _run(scenario(kept, broken=False))
        assert kept.end_offset == 10
        _run(scenario(cut, broken=True))
        assert cut.end_offset == 3
    finally:
        kept.close()
        cut.close()


def test_remove_partitions_and_close(leader, tmp_path):
    """AbstractFetcherThreadTest.testTruncateToHighWatermarkDuringRemovePartitions and
    AbstractFetcherManagerTest's idle fetcher shutdown: a removed partition is never touched
    again; a leader without partitions has no fetcher; close is idempotent and the manager
    refuses partitions after it."""
    log = _follower_log(tmp_path / "t-0", "native", records=10)

    async def scenario():
        manager = _manager(asyncio.get_running_loop(),
                           lambda broker_id: ("127.0.0.1", leader.port))
        manager.add_partitions({TP: FetchTarget(LEADER_ID, 7, log)})  # UNKNOWN_LEADER_EPOCH
        assert manager.leader_ids == {LEADER_ID} and manager.partitions == {TP}
        await _until(lambda: manager.fetch_state(TP).delayed_until is not None,
                     what="back-off")
        manager.remove_partitions([TP])
        assert manager.fetch_state(TP) is None and manager.leader_ids == frozenset()
        assert manager.partitions == frozenset()
        await asyncio.sleep(0.2)  # several back-offs: nothing may touch the log now
        assert log.end_offset == 10
        await manager.close()
        await manager.close()
        with pytest.raises(fetcher_mod.errors.IllegalStateError):
            manager.add_partitions({TP: FetchTarget(LEADER_ID, 0, log)})
        assert log.end_offset == 10

    try:
        _run(scenario())
    finally:
        log.close()


def test_config_from_kafka_names():
    """The Kafka broker configs map onto FetcherConfig (ReplicaFetcherThread's fields)."""
    config = FetcherConfig.from_kafka_config({
        "replica.fetch.wait.max.ms": "250", "replica.fetch.min.bytes": 10,
        "replica.fetch.max.bytes": "2048", "replica.fetch.response.max.bytes": 4096,
        "replica.fetch.backoff.ms": "20", "replica.socket.timeout.ms": 1000,
        "unrelated": "x"})
    assert (config.fetch_wait_max_ms, config.fetch_min_bytes, config.fetch_max_bytes,
            config.fetch_response_max_bytes, config.backoff_ms, config.request_timeout_ms) == \
        (250, 10, 2048, 4096, 20, 1000)
    assert FetcherConfig.from_kafka_config({}) == FetcherConfig()


def test_garbage_from_the_leader_is_a_connection_failure(tmp_path):
    """Bad bytes from the network (house rule: a typed error, never a crash or a hang): a
    "leader" that answers each request with something else (a frame larger than allowed, a
    frame shorter than its header, another correlation id, a body that does not decode,
    nothing at all then a close) costs the follower a reconnect and a back-off each time;
    the partition is never failed and its log never touched."""
    import struct

    log = _follower_log(tmp_path / "t-0", "native", records=10, high_watermark=10)
    kinds = ["large", "short", "wrong-id", "bad-body", "close"]
    served = []

    async def serve(reader, writer):
        kind = kinds[len(served) % len(kinds)]
        served.append(kind)
        try:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
            correlation_id = struct.unpack(">i", frame[4:8])[0]
            if kind == "large":
                writer.write(struct.pack(">i", 2**31 - 1))
            elif kind == "short":
                writer.write(struct.pack(">i", 2) + b"\x00\x00")
            elif kind == "wrong-id":
                writer.write(struct.pack(">i", 5) + struct.pack(">i", correlation_id + 7) + b"\0")
            elif kind == "bad-body":
                body = struct.pack(">i", correlation_id) + b"\x00" + b"\xff" * 40
                writer.write(struct.pack(">i", len(body)) + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def scenario():
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        manager = _manager(asyncio.get_running_loop(), lambda broker_id: ("127.0.0.1", port))
        try:
            # Truncation off: the log has epochs, so the first request is OffsetsForLeaderEpoch.
            manager.add_partitions({TP: FetchTarget(LEADER_ID, 0, log)})
            await _until(lambda: len(served) >= 2 * len(kinds), what="every kind twice")
            assert manager.failed_partitions == frozenset()
            assert manager.fetch_state(TP).state == TRUNCATING
            assert manager.request_counts["connect"] >= 2 * len(kinds)
        finally:
            await manager.close()
            server.close()
            await asyncio.wait_for(server.wait_closed(), 10)

    try:
        _run(scenario())
        assert log.end_offset == 10 and log.high_watermark == 10
    finally:
        log.close()


@pytest.mark.parametrize("bad", [dict(backoff_ms=-1), dict(fetch_max_bytes=2**31),
                                 dict(fetch_wait_max_ms=True), dict(fetch_min_bytes="1"),
                                 dict(request_timeout_ms=499, fetch_wait_max_ms=500)])
def test_config_refuses_bad_values(bad):
    """KafkaConfig's checks on the replica.* settings: ints in range, and
    replica.socket.timeout.ms >= replica.fetch.wait.max.ms."""
    with pytest.raises(fetcher_mod.errors.InvalidConfigError):
        FetcherConfig(**bad)
