"""ProducerIdManager: blocks recorded before their ids are handed out; never an id twice."""

from __future__ import annotations

import threading

import pytest

from seglog.coordinator.producer_ids import PRODUCER_ID_BLOCK_SIZE, ProducerIdManager
from seglog.store import Store


def make(persisted: list, *, fail: list | None = None) -> ProducerIdManager:
    def persist(block_end: int) -> None:
        if fail:
            raise fail.pop()
        persisted.append(block_end)
    return ProducerIdManager(persist, lock=threading.RLock())


def test_a_block_is_persisted_before_its_first_id():
    persisted: list[int] = []
    manager = make(persisted)
    assert manager.allocate() == 0
    assert persisted == [PRODUCER_ID_BLOCK_SIZE]
    ids = [manager.allocate() for _ in range(PRODUCER_ID_BLOCK_SIZE)]
    assert ids == list(range(1, PRODUCER_ID_BLOCK_SIZE + 1))
    assert persisted == [PRODUCER_ID_BLOCK_SIZE, 2 * PRODUCER_ID_BLOCK_SIZE]
    assert manager.block_end == 2 * PRODUCER_ID_BLOCK_SIZE


def test_restore_starts_after_the_recorded_block():
    persisted: list[int] = []
    manager = make(persisted)
    manager.restore(3000)
    assert manager.allocate() == 3000
    assert persisted == [4000]
    manager.restore(10)  # an older record never moves the ids back
    assert manager.block_end == 4000
    assert manager.allocate() > 3000


def test_a_failed_persist_hands_out_nothing_and_is_retried():
    persisted: list[int] = []
    manager = make(persisted, fail=[OSError("disk full")])
    with pytest.raises(OSError):
        manager.allocate()
    assert manager.block_end == 0 and persisted == []
    assert manager.allocate() == 0
    assert persisted == [PRODUCER_ID_BLOCK_SIZE]


def test_ids_stay_unique_across_store_reopens(tmp_path, backend):
    seen = set()
    for _ in range(3):
        with Store(tmp_path, backend=backend) as store:
            for _ in range(3):
                producer_id, epoch = store.init_producer_id()
                assert epoch == 0 and producer_id not in seen
                seen.add(producer_id)
    # each open starts after the block the previous one recorded
    assert sorted(seen) == [0, 1, 2, 1000, 1001, 1002, 2000, 2001, 2002]
