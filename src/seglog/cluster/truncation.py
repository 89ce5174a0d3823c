"""Where a follower's log must be cut so that it is a prefix of its leader's: pure decisions.

Kafka 2.8.2 decides this in three places, ported here rule for rule (research R§3.2); the
fetcher (:mod:`seglog.cluster.fetcher`) and the leader's fetch path (the replica manager) do
the I/O and apply the answers:

- :func:`offset_truncation_state`: the follower's truncation offset from the leader's
  ``(epoch, end offset)`` reply, OffsetsForLeaderEpoch or a Fetch's ``DivergingEpoch``
  (``AbstractFetcherThread.getOffsetTruncationState``, KIP-101 and KIP-279).
- :func:`diverging_epoch`: the leader's side of Fetch v12+, whether a follower's
  ``LastFetchedEpoch``/``FetchOffset`` shows it has diverged (``Partition.readRecords``).
- :func:`out_of_range_fetch_offset`: what a follower does after OFFSET_OUT_OF_RANGE
  (``AbstractFetcherThread.fetchOffsetAndTruncate``).

Epoch lookups are passed in as ``end_offset_for(epoch) -> (epoch, end_offset)`` callables with
the contract of ``Log.end_offset_for_epoch`` (Kafka's ``LeaderEpochFileCache.endOffsetFor``):
the largest epoch <= the one asked for and the start offset of the epoch after it (the log end
offset for the latest epoch); ``(-1, -1)`` when undefined. Nothing here does I/O, reads a
clock or logs; the negative control ``truncate_to_hw`` (:mod:`seglog.cluster.test_breaks`)
comes in as the ``breaks`` argument and is asked where the decision is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from seglog.cluster.test_breaks import NO_TEST_BREAKS, TestBreaks
from seglog.errors import OffsetOutOfRangeError

UNDEFINED_EPOCH = -1
"""Kafka's ``UNDEFINED_EPOCH``: no leader epoch (an OffsetsForLeaderEpoch v0 reply, or none)."""

UNDEFINED_EPOCH_OFFSET = -1
"""Kafka's ``UNDEFINED_EPOCH_OFFSET``: the leader knows no end offset for the epoch."""

EndOffsetFor = Callable[[int], tuple[int, int]]
"""``end_offset_for(epoch) -> (epoch, end_offset)``, ``(-1, -1)`` when undefined (see above)."""


@dataclass(frozen=True)
class TruncationState:
    """Kafka's ``OffsetTruncationState``: cut the follower's log at ``offset`` (keep every
    record below it; ``Log.truncate_to(offset)``, a no-op at or above the log end offset), then
    fetch from there when ``complete``; when not complete, ask the leader again with the
    follower's new latest epoch (the follower did not know the epoch the leader answered for)."""

    offset: int
    complete: bool


def offset_truncation_state(leader_epoch_end: tuple[int, int], *,
                            follower_end_offset_for: EndOffsetFor,
                            follower_log_end_offset: int,
                            follower_high_watermark: int,
                            breaks: TestBreaks = NO_TEST_BREAKS) -> TruncationState:
    """The follower's truncation offset for the leader's reply ``(epoch_l, end_l)``.

    Kafka's ``getOffsetTruncationState``, in its order:

    1. ``end_l`` undefined (-1): the legacy fallback, truncate to ``follower_high_watermark``,
       complete. In Kafka this is the partition's *initial fetch offset*, which for a follower
       that starts in the truncating state is its high watermark (``makeFollower``); pass that.
    2. ``epoch_l`` undefined (an OffsetsForLeaderEpoch v0 reply): ``min(end_l, LEO)``, complete.
    3. The follower's own ``(epoch_f, end_f) = follower_end_offset_for(epoch_l)``:

       - undefined (``end_f == -1``: the follower has no epoch <= ``epoch_l``):
         ``min(end_l, LEO)``, complete;
       - ``epoch_f != epoch_l`` (the follower never saw ``epoch_l``): ``min(end_f, LEO)``,
         **not complete**: truncate there and ask again with the new latest epoch (KIP-279);
       - else ``min(end_l, end_f, LEO)``, complete.

    A result below the follower's high watermark is legal (Kafka logs a warning; so should the
    caller). With the negative control ``truncate_to_hw`` on in ``breaks``, returns
    ``TruncationState(follower_high_watermark, True)`` whatever the leader said (Kafka before
    KIP-101, where a follower truncated to its high watermark on every become-follower and at
    start-up, before its first fetch: the fetcher must then take that path, as
    :func:`diverging_epoch` reports no divergence under the flag).
    """
    if breaks.enabled("truncate_to_hw"):
        return TruncationState(follower_high_watermark, True)
    leader_epoch, leader_end_offset = leader_epoch_end
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return TruncationState(follower_high_watermark, True)
    if leader_epoch == UNDEFINED_EPOCH:
        return TruncationState(min(leader_end_offset, follower_log_end_offset), True)
    follower_epoch, follower_end_offset = follower_end_offset_for(leader_epoch)
    if follower_end_offset == UNDEFINED_EPOCH_OFFSET:
        # Kafka's Log.endOffsetForEpoch answers None here: the follower tracked no epoch at or
        # below the leader's, so the leader's offset is the only one known.
        return TruncationState(min(leader_end_offset, follower_log_end_offset), True)
    if follower_epoch != leader_epoch:
        return TruncationState(min(follower_end_offset, follower_log_end_offset), False)
    return TruncationState(min(leader_end_offset, follower_end_offset, follower_log_end_offset),
                           True)


def diverging_epoch(last_fetched_epoch: int, fetch_offset: int,
                    leader_end_offset_for: EndOffsetFor, *,
                    log_start_offset: int,
                    breaks: TestBreaks = NO_TEST_BREAKS) -> tuple[int, int] | None:
    """The leader's ``DivergingEpoch {Epoch, EndOffset}`` for a follower's Fetch, or None.

    ``Partition.readRecords`` with a ``lastFetchedEpoch`` (Fetch v12+): with
    ``(epoch, end) = leader_end_offset_for(last_fetched_epoch)``, the follower has diverged
    when ``epoch < last_fetched_epoch`` (the leader never had that epoch) or
    ``end < fetch_offset`` (the follower holds records of that epoch the leader does not).
    The leader then answers with no records and this pair, and does not record the follower's
    fetch state. ``last_fetched_epoch < 0`` means the field was absent (-1): no check, None.

    Raises :class:`~seglog.errors.OffsetOutOfRangeError` (OFFSET_OUT_OF_RANGE, 1), as Kafka
    does, when the leader cannot place the epoch (``(-1, -1)`` or either half undefined) and
    when ``fetch_offset < log_start_offset`` (checked before divergence). The caller checks
    ``CurrentLeaderEpoch`` first (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).

    With the negative control ``truncate_to_hw`` on in ``breaks``, always None: a pre-KIP-101
    leader knew no epochs, and a follower truncating to its high watermark on a
    ``DivergingEpoch`` answer would only be told again, forever.
    """
    if last_fetched_epoch < 0 or breaks.enabled("truncate_to_hw"):
        return None
    epoch, end_offset = leader_end_offset_for(last_fetched_epoch)
    if end_offset == UNDEFINED_EPOCH_OFFSET or epoch == UNDEFINED_EPOCH:
        raise OffsetOutOfRangeError(
            f"could not determine the end offset of the last fetched epoch {last_fetched_epoch}")
    if fetch_offset < log_start_offset:
        raise OffsetOutOfRangeError(
            f"fetch offset {fetch_offset} is below the log start offset {log_start_offset}")
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return (epoch, end_offset)
    return None


@dataclass(frozen=True)
class OutOfRangeResolution:
    """What a follower does after OFFSET_OUT_OF_RANGE: first ``Log.truncate_to(truncate_to)``
    when it is not None, or ``Log.truncate_fully_and_start_at(start_at)`` when that is not
    None (never both), then fetch from ``fetch_offset``."""

    fetch_offset: int
    truncate_to: int | None = None
    start_at: int | None = None


def out_of_range_fetch_offset(*, follower_end_offset: int, leader_end_offset: int,
                              leader_start_offset: int | None) -> OutOfRangeResolution:
    """Kafka's ``fetchOffsetAndTruncate`` after a Fetch answered OFFSET_OUT_OF_RANGE (1).

    The follower asks the leader (ListOffsets with its replica id) for its latest offset:

    - ``leader_end_offset < follower_end_offset`` (the follower holds records the leader
      lost, after an unclean election): truncate to ``leader_end_offset`` and fetch from
      there. ``leader_start_offset`` is not used (Kafka does not ask for it; pass None).
    - else the follower asks for the leader's earliest offset and fetches from
      ``max(leader_start_offset, follower_end_offset)``; when the leader's start is above the
      follower's end (the follower was away while retention deleted what it misses), the
      follower first empties its log and starts it at ``leader_start_offset``.

    Raises ValueError when ``leader_start_offset`` is needed and None.
    """
    if leader_end_offset < follower_end_offset:
        return OutOfRangeResolution(fetch_offset=leader_end_offset,
                                    truncate_to=leader_end_offset)
    if leader_start_offset is None:
        raise ValueError("leader_start_offset is needed when the leader's end offset "
                         f"{leader_end_offset} is not below the follower's {follower_end_offset}")
    if leader_start_offset > follower_end_offset:
        return OutOfRangeResolution(fetch_offset=leader_start_offset,
                                    start_at=leader_start_offset)
    return OutOfRangeResolution(fetch_offset=follower_end_offset)


def needs_leader_start_offset(*, follower_end_offset: int, leader_end_offset: int) -> bool:
    """Whether :func:`out_of_range_fetch_offset` needs the leader's start offset for these end
    offsets (Kafka asks the leader for its earliest offset only then)."""
    return leader_end_offset >= follower_end_offset
