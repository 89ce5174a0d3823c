"""Replication throttles (KIP-73): Kafka's ``ReplicationQuotaManager``, one for the leader
side and one for the follower side of a broker.

A quota has a bound in bytes per second (the dynamic broker configs
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``: this broker's
own value, else the cluster default, else Long.MAX_VALUE, i.e. none) and a rate measured as
Kafka's ``Rate`` over ``replication.quota.window.num`` (11) samples of
``replication.quota.window.size.seconds`` (1 s): the bytes of the live samples over the time
since the oldest one started, counted as at least 10 whole windows. The quota is exceeded when
that rate is above the bound (``isQuotaExceeded``).

Which replicas are throttled comes from the topic configs
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``
(``partition:broker`` pairs or ``*``): a partition is throttled on this broker's side when the
list is ``*`` or names it with this broker's id (Kafka's ``parseThrottledPartitions``). The
lists are read from the partition's Log config on each look (topic config changes reach the
Logs through :mod:`.config_changes`), so a change needs no bookkeeping here.

- Leader (``ReplicaManager.readFromLocalLog``, ``shouldLeaderThrottle``): a follower that is
  not in the ISR fetching a throttled partition while the quota is exceeded gets no records
  for it (the rest of the answer is unchanged; a fetch that then has too few bytes waits as
  any other). The bytes of throttled partitions in every follower answer are recorded.
- Follower (``ReplicaFetcherThread.buildFetch``, ``shouldFollowerThrottle``): a throttled
  partition that has not caught up (its lag behind the leader's high watermark is unknown or
  above 0) is left out of the next Fetch while the quota is exceeded; the bytes fetched for
  throttled partitions are recorded.

Used on the broker's event loop thread only.
"""

from __future__ import annotations

import functools
import time
from typing import Callable

__all__ = ["ALL_REPLICAS", "QUOTA_SAMPLES", "QUOTA_WINDOW_MS", "UNBOUNDED_BYTES_PER_S", "ReplicationQuota",
           "throttled_partitions"]

#: Kafka's ``replication.quota.window.num`` default.
QUOTA_SAMPLES = 11
#: Kafka's ``replication.quota.window.size.seconds`` default, in ms.
QUOTA_WINDOW_MS = 1000
#: Kafka's ``QUOTA_BYTES_PER_SECOND_DEFAULT`` (Long.MAX_VALUE): no throttle.
UNBOUNDED_BYTES_PER_S = 2**63 - 1
#: The wildcard of a throttled replicas list (Kafka's ``AllReplicas``).
ALL_REPLICAS = "*"


@functools.lru_cache(maxsize=1024)
def throttled_partitions(entries: tuple[str, ...], broker_id: int) -> frozenset[int] | str:
    """Kafka's ``parseThrottledPartitions`` (cached: the Logs share their config's tuple):
    the partitions a throttled replicas list names for ``broker_id``, or :data:`ALL_REPLICAS` for ``*``. Entries that are not
    ``partition:broker`` (the config's validator refuses them) name nothing."""
    values = [e.strip() for e in entries if e.strip()]
    if values == [ALL_REPLICAS]:
        return ALL_REPLICAS
    partitions: set[int] = set()
    for value in values:
        partition, _, broker = value.partition(":")
        try:
            if int(broker) == broker_id:
                partitions.add(int(partition))
        except ValueError:
            continue
    return frozenset(partitions)


class ReplicationQuota:
    """One side's quota: a bound in bytes/s (:meth:`update_bound`), the bytes recorded
    (:meth:`record`) and whether the rate is above the bound (:meth:`exceeded`).
    ``recorded_bytes`` counts every byte recorded since the start (a broker counter, as
    Kafka's ``LeaderReplication`` / ``FollowerReplication`` byte-rate metrics' totals)."""

    __slots__ = ("name", "bound_bytes_per_s", "samples", "window_ms", "_samples",
                 "recorded_bytes", "throttled_count", "_clock")

    def __init__(self, name: str, *, samples: int = QUOTA_SAMPLES,
                 window_ms: int = QUOTA_WINDOW_MS,
                 clock_ms: Callable[[], int] | None = None):
        self.name = name
        self.bound_bytes_per_s = UNBOUNDED_BYTES_PER_S
        self.samples = max(int(samples), 1)
        self.window_ms = max(int(window_ms), 1)
        #: [start_ms, bytes] per window, oldest first.
        self._samples: list[list[int]] = []
        self.recorded_bytes = 0
        #: How many times a partition was left out because the quota was exceeded.
        self.throttled_count = 0
        self._clock = clock_ms or (lambda: time.monotonic_ns() // 1_000_000)

    @property
    def bounded(self) -> bool:
        """Whether a bound below Long.MAX_VALUE is set."""
        return self.bound_bytes_per_s < UNBOUNDED_BYTES_PER_S

    def update_bound(self, bytes_per_s: int) -> None:
        """Kafka's ``updateQuota``: the new bound applies to the rate already measured."""
        self.bound_bytes_per_s = max(int(bytes_per_s), 0)

    def _purge(self, now_ms: int) -> None:
        # SampledStat.purgeObsoleteSamples: a sample that started samples * window ago goes.
        expire_ms = self.samples * self.window_ms
        while self._samples and now_ms - self._samples[0][0] >= expire_ms:
            self._samples.pop(0)

    def record(self, size_bytes: int, now_ms: int | None = None) -> None:
        """Count ``size_bytes`` replicated now (Kafka's ``record``)."""
        if size_bytes <= 0:
            return
        now_ms = self._clock() if now_ms is None else now_ms
        self.recorded_bytes += size_bytes
        self._purge(now_ms)
        if not self._samples or now_ms - self._samples[-1][0] >= self.window_ms:
            self._samples.append([now_ms, 0])
        self._samples[-1][1] += size_bytes

    def rate_bytes_per_s(self, now_ms: int | None = None) -> float:
        """Kafka's ``Rate.measure``: the live samples' bytes over their window (at least
        ``samples - 1`` whole windows)."""
        now_ms = self._clock() if now_ms is None else now_ms
        self._purge(now_ms)
        if not self._samples:
            return 0.0
        elapsed_ms = now_ms - self._samples[0][0]
        full_windows = elapsed_ms // self.window_ms
        if full_windows < self.samples - 1:
            elapsed_ms += (self.samples - 1 - full_windows) * self.window_ms
        return sum(s[1] for s in self._samples) * 1000.0 / max(elapsed_ms, 1)

    def exceeded(self, now_ms: int | None = None) -> bool:
        """Kafka's ``isQuotaExceeded``: the measured rate is above the bound."""
        if not self.bounded:
            return False
        return self.rate_bytes_per_s(now_ms) > self.bound_bytes_per_s

    def __repr__(self) -> str:
        return (f"ReplicationQuota({self.name}, bound={self.bound_bytes_per_s}, "
                f"recorded={self.recorded_bytes})")
