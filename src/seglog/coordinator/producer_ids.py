"""Producer ids, handed out in blocks recorded durably first (Kafka's ``ProducerIdManager``).

A producer id must never be handed out twice in one data directory, across restarts and
crashes, or an idempotent producer could be taken for another one's retry. Kafka reserves
blocks of 1000 ids in its metadata log before handing any out; here the end of the last block
is written by a callback the store gives (into ``seglog-topics.json``) before the first id of
the block is returned. After a crash the next open starts after the recorded block end, so
the ids of the block that was in use are skipped, never reused.
"""

from __future__ import annotations

import threading
from typing import Callable

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "ProducerIdManager"]

#: Producer ids reserved at a time (Kafka's ``ProducerIdsBlock`` size).
PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdManager:
    """Hands out producer ids from durably recorded blocks.

    ``persist_block_end(block_end)`` must record ``block_end`` (the first id *not* reserved)
    durably before returning; it is called with ``lock`` held, once per block. Thread-safe
    (``lock``, the store's metadata lock, which the persist callback may take again).
    """

    def __init__(self, persist_block_end: Callable[[int], None], *, lock: threading.RLock):
        self._persist_block_end = persist_block_end
        self._lock = lock
        self._block_end = 0  # ids below it may have been handed out
        self._next_id = 0
        # A cluster member's source of blocks (see use_cluster_blocks); None: local blocks.
        self._claim_block: Callable[[], tuple[int, int]] | None = None

    def use_cluster_blocks(self, claim_block: Callable[[], tuple[int, int]]) -> None:
        """Take every block from now on from ``claim_block() -> (first id, last id)``
        instead of the local record: a cluster member's blocks are claimed in ZooKeeper
        (``/latest_producer_id_block``, Kafka's ``ZkProducerIdManager``), so no two brokers
        hand out the same id. The block in use is dropped; ``claim_block`` runs with the lock
        held, once per block, and what it raises is raised by :meth:`allocate`."""
        with self._lock:
            self._claim_block = claim_block
            self._next_id = self._block_end = 0

    @property
    def block_end(self) -> int:
        """The end of the last block recorded (the first id never reserved)."""
        return self._block_end

    def restore(self, block_end: int) -> None:
        """A recorded block end was read (on open, or a read-only store's refresh): ids
        below it may have been handed out before a crash, so the next one is at or after
        it."""
        with self._lock:
            self._block_end = max(self._block_end, block_end)
            self._next_id = max(self._next_id, self._block_end)

    def allocate(self) -> int:
        """A producer id never handed out before in this data directory. Records a new
        block first when the current one is used up; raises what the persist callback
        raises (then no id is handed out and the block is not taken)."""
        with self._lock:
            if self._next_id >= self._block_end and self._claim_block is not None:
                first, last = self._claim_block()
                self._next_id, self._block_end = first, last + 1
            if self._next_id >= self._block_end:
                block_end = self._next_id + PRODUCER_ID_BLOCK_SIZE
                self._persist_block_end(block_end)
                self._block_end = block_end
            producer_id = self._next_id
            self._next_id += 1
            return producer_id
