"""Per-partition load and unload of the group coordinator's state, and the glue that runs
them on leadership changes (no ZooKeeper, no brokers).

Kafka's tests these come from: ``GroupMetadataManagerTest.testLoadOffsetsWithoutGroup`` /
``testLoadGroupWithTombstone`` (a partition replayed from its log, last value wins,
tombstones delete), ``testUnloadOffsets...`` / ``removeGroupsForPartition`` (resignation
drops the partition's groups only), and ``GroupCoordinatorTest``'s
COORDINATOR_LOAD_IN_PROGRESS while loading and NOT_COORDINATOR after resignation.
"""

from __future__ import annotations

import asyncio

import pytest

from seglog import Store
from seglog import error_codes as codes
from seglog.cluster import coordinators
from seglog.coordinator import classic_group as cg
from seglog.coordinator.offsets_schema import offsets_partition_for_group
from seglog.types import OffsetAndMetadata, TopicPartition


def _groups_on_partitions(count: int, partitions: int) -> dict[int, str]:
    """One group id per partition of ``__consumer_offsets`` with ``partitions`` partitions."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < count:
        group = f"group-{i}"
        found.setdefault(offsets_partition_for_group(group, partitions), group)
        i += 1
    return found


def test_offsets_unload_and_load_one_partition(tmp_path, backend):
    """Unloading partition p forgets only the groups hashing to p; loading replays p from
    its log (last commit wins, a tombstone deletes), the others untouched."""
    with Store(tmp_path / "s", backend=backend, offsets_topic_partitions=4) as store:
        store.create_topic("t", 2)
        groups = _groups_on_partitions(2, 4)
        (p_a, a), (p_b, b) = sorted(groups.items())
        tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
        store.offset_commit(a, member_id=None, generation_id=-1,
                            offsets={tp0: OffsetAndMetadata(5), tp1: OffsetAndMetadata(7)})
        store.offset_commit(a, member_id=None, generation_id=-1,
                            offsets={tp0: OffsetAndMetadata(9)})
        store.offset_commit(b, member_id=None, generation_id=-1,
                            offsets={tp0: OffsetAndMetadata(3)})
        store.group(a).delete_offsets([tp1])

        store.unload_offsets_partition(p_a)
        assert store.offset_fetch(a, tp0) is None
        assert a not in store.groups()
        assert store.offset_fetch(b, tp0).offset == 3  # another partition: kept

        store.load_offsets_partition(p_a)
        assert store.offset_fetch(a, tp0).offset == 9
        assert store.offset_fetch(a, tp1) is None  # the tombstone replayed
        assert store.offset_fetch(b, tp0).offset == 3
        # Loading again is idempotent; a partition out of range is nothing to load.
        store.load_offsets_partition(p_a)
        store.load_offsets_partition(99)
        assert store.offset_fetch(a, tp0).offset == 9


def test_group_metadata_records_of_one_partition(tmp_path, backend):
    """``group_metadata_records(partition=p)`` reads only p's membership records."""
    with Store(tmp_path / "s", backend=backend, offsets_topic_partitions=4) as store:
        groups = _groups_on_partitions(2, 4)
        for group in groups.values():
            store.write_group_metadata(group, b"v-" + group.encode())
        for partition, group in groups.items():
            assert store.group_metadata_records(partition=partition) == {
                group: b"v-" + group.encode()}
        assert set(store.group_metadata_records()) == set(groups.values())


def test_classic_coordinator_unload_answers_parked_members():
    """Unloading a group answers its parked JoinGroup with NOT_COORDINATOR, cancels its
    timers and forgets it; other groups stay."""
    coord = cg.ClassicGroupCoordinator(cg.ClassicGroupConfig(initial_rebalance_delay_ms=3000))
    answers = {}

    def join(group_id):
        coord.join_group(group_id=group_id, member_id="", group_instance_id=None,
                         client_id="c", client_host="/h", protocol_type="consumer",
                         protocols=[("range", b"")], session_timeout_ms=10_000,
                         rebalance_timeout_ms=10_000, api_version=3, now_ms=0,
                         done=lambda result: answers.setdefault(group_id, result))
    join("a")
    join("b")
    assert not answers  # parked in the initial rebalance delay
    coord.unload("a")
    assert answers["a"].error_code == codes.NOT_COORDINATOR
    assert coord.group_ids() == ["b"]
    coord.poll(60_000)  # a's timers are gone; b's rebalance completes
    assert answers["b"].error_code == 0
    assert "a" not in coord.group_ids()


def test_coordinator_partitions_load_in_progress_then_served_then_dropped():
    """Becoming leader: 14 while the load runs, 0 once done; resigning: 16 and the unload
    runs; a resignation during a load unloads what the load brought."""
    async def scenario():
        release = asyncio.Event()
        loaded, unloaded = [], []

        async def load(partition, epoch):
            await release.wait()
            loaded.append((partition, epoch))

        partitions = coordinators.CoordinatorPartitions("__consumer_offsets", load=load,
                                                        unload=unloaded.append)
        tp = TopicPartition("__consumer_offsets", 3)
        assert partitions.error_for(3) == codes.NOT_COORDINATOR
        partitions.on_become_leader(TopicPartition("other", 3), 1)  # not ours: ignored
        partitions.on_become_leader(tp, 7)
        assert partitions.error_for(3) == codes.COORDINATOR_LOAD_IN_PROGRESS
        assert partitions.leader_epoch(3) == 7
        release.set()
        for _ in range(100):
            if partitions.error_for(3) == codes.NONE:
                break
            await asyncio.sleep(0.01)
        assert partitions.error_for(3) == codes.NONE
        assert loaded == [(3, 7)] and partitions.owned_partitions() == {3}

        partitions.on_become_follower(tp)
        assert partitions.error_for(3) == codes.NOT_COORDINATOR
        assert unloaded == [3]

        # Resigned while loading: the load's result is dropped again.
        release.clear()
        partitions.on_become_leader(tp, 8)
        await asyncio.sleep(0)
        partitions.on_become_follower(tp)
        assert partitions.error_for(3) == codes.NOT_COORDINATOR
        release.set()
        await asyncio.sleep(0.05)
        assert partitions.error_for(3) == codes.NOT_COORDINATOR
        await partitions.close()
    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_coordinator_partitions_failed_load_is_not_served():
    """A load that raises (a corrupt partition) leaves the partition NOT_COORDINATOR and
    unloads whatever it did."""
    async def scenario():
        unloaded = []

        async def load(partition, epoch):
            raise ValueError("corrupt")

        partitions = coordinators.CoordinatorPartitions("__consumer_offsets", load=load,
                                                        unload=unloaded.append)
        partitions.on_become_leader(TopicPartition("__consumer_offsets", 0), 1)
        for _ in range(100):
            if unloaded:
                break
            await asyncio.sleep(0.01)
        assert unloaded == [0]
        assert partitions.error_for(0) == codes.NOT_COORDINATOR
    asyncio.run(asyncio.wait_for(scenario(), 10))


@pytest.mark.parametrize("key,partitions", [("group", 50), ("", 50), ("x" * 300, 7)])
def test_coordinator_partition_matches_offsets_schema(key, partitions):
    assert coordinators.coordinator_partition(key, partitions) == \
        offsets_partition_for_group(key, partitions)


def test_transactions_unload_and_load_one_partition(tmp_path, backend):
    """Unloading ``__transaction_state`` partition p forgets only its transactional ids;
    loading replays p (same producer id and epoch) and its markers then carry the given
    coordinator epoch (Kafka: the partition's leader epoch), which data logs fence by
    (TransactionStateManagerTest's load/remove of one partition; a marker of an older
    coordinator epoch is refused)."""
    from seglog.coordinator.txn_schema import partition_for_transactional_id
    from seglog.errors import TransactionCoordinatorFencedError

    with Store(tmp_path / "s", backend=backend, transaction_state_partitions=4) as store:
        store.create_topic("t", 1)
        ids: dict[int, str] = {}
        i = 0
        while len(ids) < 2:
            ids.setdefault(partition_for_transactional_id(f"txn-{i}", 4), f"txn-{i}")
            i += 1
        (p_a, a), (_p_b, b) = sorted(ids.items())
        pid_a, epoch_a = store.init_producer_id(a)
        store.init_producer_id(b)
        coordinator = store.transaction_coordinator()

        coordinator.unload_partition(p_a)
        assert coordinator.describe(a) is None
        assert coordinator.describe(b) is not None

        coordinator.load_partition(p_a, coordinator_epoch=5)
        described = coordinator.describe(a)
        assert (described.producer_id, described.producer_epoch) == (pid_a, epoch_a)
        assert coordinator.coordinator_epoch(a) == 5
        assert coordinator.coordinator_epoch(b) == 0

        tp = TopicPartition("t", 0)
        store.add_partitions_to_txn(a, pid_a, epoch_a, [tp])
        store.end_txn(a, pid_a, epoch_a, commit=True)
        log_ = store.log(("t", 0))
        with pytest.raises(TransactionCoordinatorFencedError):
            log_.append_txn_marker(producer_id=pid_a, producer_epoch=epoch_a,
                                   coordinator_epoch=4, commit=False)
        log_.append_txn_marker(producer_id=pid_a, producer_epoch=epoch_a,
                               coordinator_epoch=5, commit=False)
