"""The fetcher's side of a fetch session (KIP-227; Kafka's ``FetchSessionHandler``), used by a
follower's replica fetcher for each leader it fetches from.

The first request is full (session id 0, epoch 0) and names every partition; when the leader
answers with a session id, the next requests are incremental: epoch 1, 2, ... (wrapping past
the int32 maximum to 1), naming only the partitions added or whose request changed (fetch
offset, log start offset, max bytes, leader epochs), and forgetting the ones no longer
fetched. An incremental answer holds only the partitions with something new; the others are
unchanged. Any error of the session (FETCH_SESSION_ID_NOT_FOUND: start again with a new
session; any other top-level error: a full request that closes the old session, epoch 0 with
its id), an answer that names partitions it should not, or an answer without a session id
sends the next request in full.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from .. import error_codes as codes
from ..types import TopicPartition
from .inter_broker import FetchPartitionRequest

__all__ = ["FetchRequestPlan", "FetchSessionClient"]

_INVALID_SESSION_ID = 0
_INITIAL_EPOCH = 0
_FINAL_EPOCH = -1
_INT32_MAX = 2**31 - 1


def _next_epoch(epoch: int) -> int:
    # FetchMetadata.nextEpoch.
    if epoch < 0:
        return _FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


class FetchRequestPlan(NamedTuple):
    """One request to send: its session id and epoch, the partitions it names and the ones
    it forgets; ``full`` when it names every partition fetched."""

    session_id: int
    session_epoch: int
    partitions: dict[TopicPartition, FetchPartitionRequest]
    forgotten: tuple[TopicPartition, ...]
    full: bool


class FetchSessionClient:
    """Kafka's ``FetchSessionHandler`` for one leader: :meth:`build` the next request from
    every partition to fetch now, send it, and give the answer to :meth:`handle_response`
    (whether the answer may be used)."""

    def __init__(self) -> None:
        self.session_id = _INVALID_SESSION_ID
        self.epoch = _INITIAL_EPOCH
        #: The partitions of the session and what was last asked of each.
        self._session: dict[TopicPartition, FetchPartitionRequest] = {}
        #: Requests by kind (``full``, ``incremental``) and session errors seen (``error``).
        self.counts = {"full": 0, "incremental": 0, "error": 0}

    @property
    def full_next(self) -> bool:
        """Whether the next request is full (epoch 0 or -1)."""
        return self.epoch in (_INITIAL_EPOCH, _FINAL_EPOCH)

    def build(self, wanted: Mapping[TopicPartition, FetchPartitionRequest]) -> FetchRequestPlan:
        """The next request for ``wanted`` (Kafka's ``FetchSessionHandler.Builder.build``)."""
        if self.full_next:
            self._session = dict(wanted)
            self.counts["full"] += 1
            return FetchRequestPlan(self.session_id, self.epoch, dict(wanted), (), True)
        changed = {tp: data for tp, data in wanted.items() if self._session.get(tp) != data}
        forgotten = tuple(tp for tp in self._session if tp not in wanted)
        self._session = dict(wanted)
        self.counts["incremental"] += 1
        return FetchRequestPlan(self.session_id, self.epoch, changed, forgotten, False)

    def handle_response(self, plan: FetchRequestPlan, error_code: int, session_id: int,
                        answered: Mapping[TopicPartition, object]) -> bool:
        """Kafka's ``handleResponse``: move the session on and say whether the answer's
        partitions may be used; on False nothing of it is."""
        if error_code != codes.NONE:
            self.counts["error"] += 1
            if error_code == codes.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id, self.epoch = _INVALID_SESSION_ID, _INITIAL_EPOCH
            else:
                # A full request that closes the session (nextCloseExisting).
                self.epoch = _INITIAL_EPOCH
            return False
        if plan.full:
            if any(tp not in plan.partitions for tp in answered) or \
                    len(answered) != len(plan.partitions):
                self.session_id, self.epoch = _INVALID_SESSION_ID, _INITIAL_EPOCH
                return False
            if session_id == _INVALID_SESSION_ID:
                self.session_id, self.epoch = _INVALID_SESSION_ID, _INITIAL_EPOCH
            else:
                self.session_id, self.epoch = session_id, _next_epoch(_INITIAL_EPOCH)
            return True
        if any(tp not in self._session for tp in answered):
            self.epoch = _INITIAL_EPOCH  # nextCloseExisting
            return False
        if session_id == _INVALID_SESSION_ID:
            # The leader closed the session.
            self.session_id, self.epoch = _INVALID_SESSION_ID, _INITIAL_EPOCH
        else:
            self.epoch = _next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """Kafka's ``handleError``: the request failed on the way (the leader may or may not
        have seen it), so the next one is full and closes the session."""
        self.epoch = _INITIAL_EPOCH

    def reset(self) -> None:
        """Start again with a full request and a new session (a new connection or leader)."""
        self.session_id, self.epoch = _INVALID_SESSION_ID, _INITIAL_EPOCH
        self._session = {}
