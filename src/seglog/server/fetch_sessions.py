"""Fetch sessions (KIP-227): the broker's session cache and the context of one Fetch request
(Kafka's ``FetchSession.scala``: ``CachedPartition``, ``FetchSession``,
``FetchSessionCacheShard``, ``FetchSessionCache``, ``FetchManager.newContext`` and the four
``FetchContext`` kinds).

A fetcher that sends session epoch 0 (``INITIAL_EPOCH``) asks for a session: it is answered
in full and, when the cache has (or can make) room, with a new session id; its next requests
carry that id and the epochs 1, 2, ... and list only the partitions that were added or whose
fetch parameters changed (``topics``) and the ones to drop (``forgotten_topics_data``). The
broker reads every partition of the session and answers only those with something new
(records, a changed high watermark or log start offset, an error, a diverging epoch:
:meth:`CachedPartition.must_respond`). Epoch -1 (``FINAL_EPOCH``) is a sessionless full
request, and closes the session it names.

Errors, as Kafka's: an incremental request for a session id the cache does not hold gets
FETCH_SESSION_ID_NOT_FOUND, one with the wrong epoch INVALID_FETCH_SESSION_EPOCH, and one whose
request version disagrees with the session about topic ids (v13+ name topics by id)
FETCH_SESSION_TOPIC_ID_ERROR; each with session id 0 and no partitions.

The cache (``max.incremental.fetch.session.cache.slots``, 1000) is split as Kafka's into
:data:`CACHE_SHARDS` shards, each with ``slots // 8`` entries and its own range of session ids;
new sessions go to the shards in turn. A full shard makes room by Kafka's ``tryEvict``: the
least recently used session when it was unused for more than
:data:`MIN_EVICTION_MS` (Kafka's ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``, a constant);
otherwise the smallest evictable session (by ``(privileged, size, id)``) when the new one
is not smaller. A session becomes evictable by a privileged one (a follower's) unless it is
privileged and younger than :data:`MIN_EVICTION_MS`, and by any one once it is older than
that.

Everything runs on the event loop thread: no locks. Keys of partitions are ``(topic, index)``
with the topic's name (requests before v13) or its id (``uuid.UUID``, v13+).
"""

from __future__ import annotations

import itertools
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from .. import error_codes as codes

__all__ = [
    "CACHE_SHARDS", "CACHE_SLOTS_DEFAULT", "FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID",
    "MIN_EVICTION_MS", "CachedPartition", "FetchContext", "FetchManager", "FetchSession",
    "FetchSessionCacheShard", "PartitionData", "PartitionKey", "PartitionOutcome",
    "next_epoch",
]

#: ``FetchMetadata.INVALID_SESSION_ID``: no session.
INVALID_SESSION_ID = 0
#: ``FetchMetadata.INITIAL_EPOCH``: a full request that asks for a new session.
INITIAL_EPOCH = 0
#: ``FetchMetadata.FINAL_EPOCH``: a full request outside any session (closes the one named).
FINAL_EPOCH = -1
#: Kafka's ``max.incremental.fetch.session.cache.slots`` default.
CACHE_SLOTS_DEFAULT = 1000
#: Kafka's ``NumFetchSessionCacheShards`` (KAFKA-9401).
CACHE_SHARDS = 8
#: Kafka's ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``: a session unused for longer may be
#: evicted by any new one; a session younger than this is not evictable by size.
MIN_EVICTION_MS = 120_000
_INT32_MAX = 2**31 - 1

#: A partition of a session: ``(topic name or topic id, partition index)``.
PartitionKey = tuple["str | uuid.UUID", int]


def next_epoch(epoch: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``: -1 stays -1, the int32 maximum wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _INT32_MAX:
        return 1
    return epoch + 1


class PartitionData(NamedTuple):
    """What a fetcher asks of one partition (Kafka's ``FetchRequest.PartitionData``)."""

    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int


class PartitionOutcome(NamedTuple):
    """What a read of one partition answered, as far as a session cares."""

    error_code: int
    high_watermark: int
    log_start_offset: int
    records_size_bytes: int
    diverging: bool


class CachedPartition:
    """One partition of a session: the fetcher's last request parameters and the high
    watermark and log start offset it was last told (Kafka's ``CachedPartition``)."""

    __slots__ = ("data", "high_watermark", "local_log_start_offset")

    def __init__(self, data: PartitionData, high_watermark: int = -1,
                 local_log_start_offset: int = -1):
        self.data = data
        self.high_watermark = high_watermark
        self.local_log_start_offset = local_log_start_offset

    def must_respond(self, outcome: PartitionOutcome, update: bool) -> bool:
        """Kafka's ``maybeUpdateResponseData``: whether an incremental response must carry
        this partition (records, a new high watermark or log start offset, an error, a
        diverging epoch); with ``update`` the cached values follow the answer (an error
        resets the cached high watermark so the partition is sent again once it clears)."""
        must = outcome.records_size_bytes > 0
        if self.high_watermark != outcome.high_watermark:
            must = True
            if update:
                self.high_watermark = outcome.high_watermark
        if self.local_log_start_offset != outcome.log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = outcome.log_start_offset
        if outcome.error_code != codes.NONE:
            if update:
                self.high_watermark = -1
            must = True
        return must or outcome.diverging


class FetchSession:
    """One incremental fetch session (Kafka's ``FetchSession``): its partitions in order (a
    partition that returned records moves to the end, so the next request reads the others
    first), the next epoch expected, and the facts eviction looks at."""

    __slots__ = ("id", "privileged", "partitions", "uses_topic_ids", "creation_ms",
                 "last_used_ms", "epoch", "cached_size", "evictable_by_all",
                 "evictable_by_privileged")

    def __init__(self, session_id: int, privileged: bool,
                 partitions: dict[PartitionKey, CachedPartition], uses_topic_ids: bool,
                 now_ms: int):
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        #: The epoch the next request must carry.
        self.epoch = next_epoch(INITIAL_EPOCH)
        #: The size the cache last saw (-1: not in the cache).
        self.cached_size = -1
        self.evictable_by_all = False
        self.evictable_by_privileged = False

    def update(self, fetch_data: Mapping[PartitionKey, PartitionData],
               to_forget: Iterable[PartitionKey]) -> None:
        """Kafka's ``FetchSession.update``: add or update the partitions the request names,
        drop the forgotten ones."""
        partitions = self.partitions
        for key, data in fetch_data.items():
            cached = partitions.get(key)
            if cached is None:
                partitions[key] = CachedPartition(data)
            else:
                cached.data = data
        for key in to_forget:
            partitions.pop(key, None)

    def evictable_key(self) -> tuple[bool, int, int]:
        """Kafka's ``EvictableKey``: the smallest is evicted first."""
        return (self.privileged, self.cached_size, self.id)


class FetchSessionCacheShard:
    """One shard of the session cache (Kafka's ``FetchSessionCacheShard``): at most
    ``max_entries`` sessions with ids in ``[max(1, shard * id_range), (shard + 1) *
    id_range)``."""

    def __init__(self, max_entries: int, eviction_ms: int, id_range: int = _INT32_MAX,
                 shard: int = 0, rng: random.Random | None = None):
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.id_range = id_range
        self.shard = shard
        self.sessions: dict[int, FetchSession] = {}
        #: Sessions evicted to make room (Kafka's IncrementalFetchSessionEvictionsPerSec).
        self.evictions = 0
        self._rng = rng or random.Random()

    def get(self, session_id: int) -> FetchSession | None:
        """The session of that id, or None."""
        return self.sessions.get(session_id)

    def total_partitions(self) -> int:
        """Kafka's NumIncrementalFetchPartitionsCached for this shard."""
        return sum(s.cached_size for s in self.sessions.values())

    def _new_session_id(self) -> int:
        low = max(1, self.shard * self.id_range)
        high = (self.shard + 1) * self.id_range
        while True:
            session_id = self._rng.randrange(low, high)
            if session_id not in self.sessions and session_id != INVALID_SESSION_ID:
                return session_id

    def maybe_create(self, now_ms: int, privileged: bool, size: int, uses_topic_ids: bool,
                     partitions: dict[PartitionKey, CachedPartition]) -> int:
        """Kafka's ``maybeCreateSession``: the new session's id, or INVALID_SESSION_ID when
        the shard is full and nothing could be evicted."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(
                privileged, (privileged, size, 0), now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_session_id(), privileged, partitions,
                               uses_topic_ids, now_ms)
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: int) -> bool:
        """Kafka's ``tryEvict``: a stale session first, else the least valuable evictable
        one if the new session is worth at least as much."""
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stale.last_used_ms > self.eviction_ms:
            self.remove(stale.id)
            self.evictions += 1
            return True
        candidates = [s for s in self.sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if key < victim.evictable_key():
            return False
        self.remove(victim.id)
        self.evictions += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        """Drop the session of that id; the session, or None."""
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.cached_size = -1
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Kafka's ``touch``: the session was used now; its size and evictability follow."""
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old
        session.evictable_by_all = old


@dataclass(eq=False)
class FetchContext:
    """What one Fetch request reads and how its answer is shaped (Kafka's ``FetchContext``).

    ``kind`` is ``"error"`` (a session error: ``error_code``, nothing read), ``"sessionless"``,
    ``"full"`` (answered in full; a session is made then) or ``"incremental"``.
    :meth:`partitions` lists what to read, in order; :meth:`respond` takes every partition's
    outcome and returns the response's top-level error, its session id and the keys to send.
    """

    kind: str
    error_code: int = codes.NONE
    fetch_data: Mapping[PartitionKey, PartitionData] | None = None
    session: FetchSession | None = None
    request_epoch: int = FINAL_EPOCH
    manager: "FetchManager | None" = None
    uses_topic_ids: bool = False
    privileged: bool = False

    def partitions(self) -> list[tuple[PartitionKey, PartitionData]]:
        """The partitions to read (a full request's own, or every partition of the
        session), in order."""
        if self.kind == "incremental":
            assert self.session is not None
            return [(key, cached.data) for key, cached in self.session.partitions.items()]
        if self.fetch_data is None:
            return []
        return list(self.fetch_data.items())

    def _epoch_moved(self) -> bool:
        # Two requests of one epoch raced (a duplicate): the later answer is refused.
        assert self.session is not None
        return self.session.epoch != next_epoch(self.request_epoch)

    def respond(self, outcomes: Sequence[tuple[PartitionKey, PartitionOutcome]]
                ) -> tuple[int, int, set[PartitionKey] | None]:
        """Kafka's ``updateAndGenerateResponseData``: ``(error code, session id, keys)``;
        ``keys`` None means every partition read is sent."""
        if self.kind == "error":
            return self.error_code, INVALID_SESSION_ID, set()
        if self.kind == "sessionless":
            return codes.NONE, INVALID_SESSION_ID, None
        if self.kind == "full":
            assert self.manager is not None and self.fetch_data is not None
            fetch_data = self.fetch_data
            cached = {key: CachedPartition(fetch_data[key], o.high_watermark,
                                           o.log_start_offset)
                      for key, o in outcomes if key in fetch_data}
            session_id = self.manager.create_session(self.privileged, self.uses_topic_ids,
                                                     cached)
            return codes.NONE, session_id, None
        session = self.session
        assert session is not None
        if self._epoch_moved():
            return codes.INVALID_FETCH_SESSION_EPOCH, session.id, set()
        keys: set[PartitionKey] = set()
        partitions = session.partitions
        for key, outcome in outcomes:
            cached_partition = partitions.get(key)
            if cached_partition is None:
                continue
            if cached_partition.must_respond(outcome, True):
                keys.add(key)
                if outcome.records_size_bytes > 0:
                    # Rotation: the next request reads this partition after the others.
                    del partitions[key]
                    partitions[key] = cached_partition
        return codes.NONE, session.id, keys

    def throttled(self) -> tuple[int, int]:
        """Kafka's ``getThrottledResponse``: ``(error code, session id)`` of the empty answer
        to a throttled request (a full request gets no session then)."""
        if self.kind != "incremental":
            return codes.NONE, INVALID_SESSION_ID
        assert self.session is not None
        if self._epoch_moved():
            return codes.INVALID_FETCH_SESSION_EPOCH, self.session.id
        return codes.NONE, self.session.id


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class FetchManager:
    """The broker's fetch session cache and the maker of each request's
    :class:`FetchContext` (Kafka's ``FetchManager`` and ``FetchSessionCache``).

    ``slots`` is ``max.incremental.fetch.session.cache.slots``; ``clock_ms`` gives the time in
    milliseconds (a monotonic clock; tests may pass their own)."""

    def __init__(self, slots: int = CACHE_SLOTS_DEFAULT, *, eviction_ms: int = MIN_EVICTION_MS,
                 clock_ms: Any = None, rng: random.Random | None = None):
        id_range = _INT32_MAX // CACHE_SHARDS
        self.shards = [FetchSessionCacheShard(slots // CACHE_SHARDS, eviction_ms, id_range,
                                              shard, rng) for shard in range(CACHE_SHARDS)]
        self._next_shard = itertools.cycle(self.shards)
        self._clock_ms = clock_ms or _monotonic_ms
        #: Requests by the context they got (``full``, ``incremental``, ``sessionless``,
        #: ``error``): what the broker's fetchers do, for tests and benchmarks.
        self.counts: dict[str, int] = {"full": 0, "incremental": 0, "sessionless": 0,
                                       "error": 0}

    def shard_of(self, session_id: int) -> FetchSessionCacheShard | None:
        """Kafka's ``getCacheShard``: the shard whose id range holds ``session_id``."""
        index = session_id // self.shards[0].id_range
        return self.shards[index] if 0 <= index < len(self.shards) else None

    def session(self, session_id: int) -> FetchSession | None:
        """The cached session of that id, or None."""
        shard = self.shard_of(session_id)
        return shard.get(session_id) if shard is not None else None

    def size(self) -> int:
        """Kafka's NumIncrementalFetchSessions."""
        return sum(len(shard.sessions) for shard in self.shards)

    def evictions(self) -> int:
        """Sessions evicted to make room, over every shard."""
        return sum(shard.evictions for shard in self.shards)

    def create_session(self, privileged: bool, uses_topic_ids: bool,
                       partitions: dict[PartitionKey, CachedPartition]) -> int:
        """A new session in the next shard (round robin); its id, or INVALID_SESSION_ID."""
        shard = next(self._next_shard)
        return shard.maybe_create(self._clock_ms(), privileged, len(partitions),
                                  uses_topic_ids, partitions)

    def new_context(self, version: int, session_id: int, epoch: int, *, follower: bool,
                    fetch_data: Mapping[PartitionKey, PartitionData],
                    to_forget: Iterable[PartitionKey]) -> FetchContext:
        """Kafka's ``FetchManager.newContext`` for a request of ``version`` with these session
        id and epoch (versions before 7 have none: pass 0 and -1)."""
        uses_topic_ids = version >= 13
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                # Any session a full request names is closed.
                shard = self.shard_of(session_id)
                if shard is not None:
                    shard.remove(session_id)
            if epoch == FINAL_EPOCH:
                self.counts["sessionless"] += 1
                return FetchContext("sessionless", fetch_data=fetch_data)
            self.counts["full"] += 1
            return FetchContext("full", fetch_data=fetch_data, manager=self,
                                uses_topic_ids=uses_topic_ids, privileged=follower)
        shard = self.shard_of(session_id)
        session = shard.get(session_id) if shard is not None else None
        if shard is None or session is None:
            self.counts["error"] += 1
            return FetchContext("error", error_code=codes.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            self.counts["error"] += 1
            return FetchContext("error", error_code=codes.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            self.counts["error"] += 1
            return FetchContext("error", error_code=codes.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(fetch_data, to_forget)
        if not session.partitions:
            # Nothing left: the session closes and this request is sessionless.
            shard.remove(session.id)
            self.counts["sessionless"] += 1
            return FetchContext("sessionless", fetch_data=fetch_data)
        shard.touch(session, self._clock_ms())
        session.epoch = next_epoch(session.epoch)
        self.counts["incremental"] += 1
        return FetchContext("incremental", session=session, request_epoch=epoch)
