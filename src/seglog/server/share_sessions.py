"""Share sessions (KIP-932): the broker's share session cache and the context of one
ShareFetch request (Kafka 4.4's ``ShareSessionCache``, ``ShareSession``, ``ShareSessionKey``,
``CachedSharePartition``, ``ShareSessionContext``, ``FinalContext`` and
``SharePartitionManager.newContext`` / ``acknowledgeSessionUpdate``).

A share session belongs to one member of one share group (its key is ``(group id, member
id)``, there is no session id). The member opens it with share session epoch 0
(``INITIAL_EPOCH``), naming its partitions; that request is answered in full (every named
partition, with or without records) and must carry no acknowledgements (INVALID_REQUEST).
Its next requests carry the epochs 1, 2, ... (``next_epoch``: the int32 maximum wraps to 1),
name only the partitions to add and list the ones to drop in ``forgotten_topics_data``; the
broker fetches every partition of the session and answers only those with records, an error
or that were just added (:meth:`CachedSharePartition.must_respond`). Epoch -1
(``FINAL_EPOCH``) closes the session: it may acknowledge, fetches nothing, and the member's
acquired records are released afterwards. A ShareAcknowledge with a positive epoch must
carry the session's epoch and moves it on; with -1 it closes the session.

Errors, as Kafka's: a session the cache does not hold SHARE_SESSION_NOT_FOUND, the wrong
epoch INVALID_SHARE_SESSION_EPOCH (also a ShareAcknowledge with epoch 0), a full cache
(``group.share.max.share.sessions``, 2000) SHARE_SESSION_LIMIT_REACHED (the handler answers
it after ``max_wait_ms``, as Kafka's idle timer task does).

Per connection: a session remembers the connection that opened it. When that connection
closes, the session is dropped and the member counted as left (the listener's
``on_member_leave`` releases its records); when the last session of a group is gone that
way, ``on_group_empty``. A session replaced or closed by a request is marked stale for its
old connection (Kafka's ``SessionKeyAndState.markStale``) so that its closing does not
release anything twice.

Everything runs on the event loop thread: no locks. A partition of a session is
``(topic id, partition index)``; the session keeps the topic's name as resolved when the
partition was added (None: an unknown topic id, answered UNKNOWN_TOPIC_ID).
"""

from __future__ import annotations

import uuid
from typing import Iterable, NamedTuple, Protocol, Sequence

from .. import error_codes as codes

__all__ = [
    "FINAL_EPOCH", "INITIAL_EPOCH", "MAX_SHARE_SESSIONS_CONFIG", "MAX_SHARE_SESSIONS_DEFAULT",
    "CachedSharePartition", "PartitionKey", "ShareFetchContext", "ShareSession",
    "ShareSessionCache", "ShareSessionError", "ShareSessionKey", "ShareSessionListener",
    "SharedPartition", "next_epoch",
]

#: ``ShareRequestMetadata.INITIAL_EPOCH``: open (or reopen) the member's share session.
INITIAL_EPOCH = 0
#: ``ShareRequestMetadata.FINAL_EPOCH``: close the member's share session.
FINAL_EPOCH = -1
#: Kafka's broker config bounding the share sessions of one broker, and its default.
MAX_SHARE_SESSIONS_CONFIG = "group.share.max.share.sessions"
MAX_SHARE_SESSIONS_DEFAULT = 2000
_INT32_MAX = 2**31 - 1

#: A partition of a share session: ``(topic id, partition index)``.
PartitionKey = tuple[uuid.UUID, int]


def next_epoch(epoch: int) -> int:
    """Kafka's ``ShareRequestMetadata.nextEpoch``: -1 stays -1, the int32 maximum wraps to
    1."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _INT32_MAX:
        return 1
    return epoch + 1


class ShareSessionError(Exception):
    """A request the session cache refuses, with Kafka's ``error_code``."""

    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message or codes.name(error_code))
        self.error_code = error_code


class ShareSessionKey(NamedTuple):
    """Kafka's ``ShareSessionKey``: a member of a share group."""

    group_id: str
    member_id: str


class SharedPartition(NamedTuple):
    """A partition a request names: its topic id, the topic's name on this broker (None for
    an unknown id) and its index (Kafka's ``TopicIdPartition``)."""

    topic_id: uuid.UUID
    topic: str | None
    partition: int

    @property
    def key(self) -> PartitionKey:
        """``(topic id, partition index)``."""
        return (self.topic_id, self.partition)


class CachedSharePartition:
    """Kafka's ``CachedSharePartition``: a partition of a session and whether the next
    answer must name it (just added, or it failed last time)."""

    __slots__ = ("topic_id", "topic", "partition", "requires_update_in_response")

    def __init__(self, part: SharedPartition, requires_update_in_response: bool) -> None:
        self.topic_id = part.topic_id
        self.topic = part.topic
        self.partition = part.partition
        self.requires_update_in_response = requires_update_in_response

    def shared(self) -> SharedPartition:
        """The partition as a request names it."""
        return SharedPartition(self.topic_id, self.topic, self.partition)

    def must_respond(self, has_records: bool, error_code: int, update: bool) -> bool:
        """Kafka's ``maybeUpdateResponseData``: whether an incremental answer names this
        partition (records, an error, or a pending update); with ``update`` the pending
        flag is consumed (and set again by an error)."""
        must = has_records
        if self.requires_update_in_response:
            must = True
            if update:
                self.requires_update_in_response = False
        if error_code != codes.NONE:
            if update:
                self.requires_update_in_response = True
            must = True
        return must


class ShareSession:
    """Kafka's ``ShareSession``: its key, its partitions in order (a partition that returned
    records moves to the end), its epoch (the one the next request must carry) and the
    connection that opened it."""

    __slots__ = ("key", "partitions", "epoch", "connection_id", "cached_size")

    def __init__(self, key: ShareSessionKey, partitions: dict[PartitionKey, CachedSharePartition],
                 epoch: int, connection_id: int) -> None:
        self.key = key
        self.partitions = partitions
        self.epoch = epoch
        self.connection_id = connection_id
        self.cached_size = -1

    def update(self, share_fetch_data: Sequence[SharedPartition],
               to_forget: Sequence[SharedPartition]) -> tuple[list[PartitionKey],
                                                              list[PartitionKey],
                                                              list[PartitionKey]]:
        """Kafka's ``ShareSession.update``: ``(added, updated, removed)``; an added partition
        is named in the next answer whatever it holds."""
        added: list[PartitionKey] = []
        updated: list[PartitionKey] = []
        removed: list[PartitionKey] = []
        for part in share_fetch_data:
            if part.key in self.partitions:
                updated.append(part.key)
            else:
                self.partitions[part.key] = CachedSharePartition(part, True)
                added.append(part.key)
        for part in to_forget:
            if self.partitions.pop(part.key, None) is not None:
                removed.append(part.key)
        return added, updated, removed

    def update_cached_size(self) -> int:
        """Kafka's ``updateCachedSize``: the change in the number of partitions since the
        last call (the first call: the number)."""
        previous = self.cached_size
        self.cached_size = len(self.partitions)
        return self.cached_size - previous if previous != -1 else self.cached_size


class ShareSessionListener(Protocol):
    """Kafka's ``ShareGroupListener`` as the cache calls it when a session's connection
    closes."""

    def on_member_leave(self, group_id: str, member_id: str) -> None:
        """The member's session is gone with its connection: release its records."""
        ...

    def on_group_empty(self, group_id: str) -> None:
        """No member of the group has a session here any more."""
        ...


class _KeyAndState:
    """Kafka's ``SessionKeyAndState``: the session a connection opened, and whether it was
    since replaced or closed (stale)."""

    __slots__ = ("key", "stale")

    def __init__(self, key: ShareSessionKey) -> None:
        self.key = key
        self.stale = False


class ShareFetchContext:
    """The session side of one ShareFetch (Kafka's ``ShareSessionContext`` and
    ``FinalContext``): ``kind`` is ``"full"`` (epoch 0: answer every named partition),
    ``"subsequent"`` (a positive epoch: fetch the session's partitions, answer those with
    something to say) or ``"final"`` (epoch -1: fetch nothing)."""

    def __init__(self, kind: str, epoch: int, *,
                 share_fetch_data: Sequence[SharedPartition] = (),
                 session: ShareSession | None = None) -> None:
        self.kind = kind
        self.epoch = epoch
        self.share_fetch_data = list(share_fetch_data)
        self.session = session

    def erroneous_and_valid(self) -> tuple[list[tuple[SharedPartition, int]],
                                           list[SharedPartition]]:
        """Kafka's ``getErroneousAndValidTopicIdPartitions``: the partitions to fetch, and
        the ones answered UNKNOWN_TOPIC_ID (a topic id this broker does not know)."""
        if self.kind == "final":
            return [], []
        if self.kind == "full":
            parts: Iterable[SharedPartition] = self.share_fetch_data
        else:
            assert self.session is not None
            parts = [cached.shared() for cached in self.session.partitions.values()]
        erroneous: list[tuple[SharedPartition, int]] = []
        valid: list[SharedPartition] = []
        for part in parts:
            if part.topic is None:
                erroneous.append((part, codes.UNKNOWN_TOPIC_ID))
            else:
                valid.append(part)
        return erroneous, valid

    def _epoch_moved(self) -> bool:
        """A subsequent context whose session moved on meanwhile (a duplicate request)."""
        assert self.session is not None
        return self.session.epoch != next_epoch(self.epoch)

    def throttled(self) -> int:
        """The top-level error of a throttled answer (no partitions): NONE, or
        INVALID_SHARE_SESSION_EPOCH when the session moved on meanwhile."""
        if self.kind == "subsequent" and self._epoch_moved():
            return codes.INVALID_SHARE_SESSION_EPOCH
        return codes.NONE

    def respond(self, outcomes: Sequence[tuple[PartitionKey, bool, int]]
                ) -> tuple[int, set[PartitionKey] | None]:
        """Kafka's ``updateAndGenerateResponseData`` over ``[(partition, has records, error
        code)]``: ``(top-level error, the partitions to answer)``; None answers them all (a
        full or final context)."""
        if self.kind != "subsequent":
            return codes.NONE, None
        session = self.session
        assert session is not None
        if self._epoch_moved():
            return codes.INVALID_SHARE_SESSION_EPOCH, set()
        selected: set[PartitionKey] = set()
        for key, has_records, error_code in outcomes:
            cached = session.partitions.get(key)
            if cached is None:
                continue  # forgotten meanwhile
            if cached.must_respond(has_records, error_code, True):
                selected.add(key)
                if has_records:
                    # Kafka moves a partition that returned records to the end, so that the
                    # next fetches start with the others.
                    session.partitions[key] = session.partitions.pop(key)
        return codes.NONE, selected


class ShareSessionCache:
    """Kafka's ``ShareSessionCache`` and the session half of ``SharePartitionManager``:
    at most ``max_entries`` sessions (``group.share.max.share.sessions``)."""

    def __init__(self, max_entries: int = MAX_SHARE_SESSIONS_DEFAULT) -> None:
        self.max_entries = max_entries
        self.sessions: dict[ShareSessionKey, ShareSession] = {}
        self._members_per_group: dict[str, int] = {}
        self._by_connection: dict[int, _KeyAndState] = {}
        self._listener: ShareSessionListener | None = None
        self.num_partitions = 0

    # --- the cache --------------------------------------------------------------------------

    def get(self, key: ShareSessionKey) -> ShareSession | None:
        """The session of ``key``, or None."""
        return self.sessions.get(key)

    def __len__(self) -> int:
        return len(self.sessions)

    def num_members(self, group_id: str) -> int | None:
        """How many members of ``group_id`` hold a session here (None: none ever since the
        group last emptied)."""
        return self._members_per_group.get(group_id)

    def remove(self, key: ShareSessionKey) -> ShareSession | None:
        """Drop the session of ``key`` (its connection's entry becomes stale); the session,
        or None when there was none."""
        session = self.sessions.pop(key, None)
        if session is None:
            return None
        self.num_partitions -= max(session.cached_size, 0)
        self._members_per_group[key.group_id] = self._members_per_group.get(key.group_id, 1) - 1
        entry = self._by_connection.get(session.connection_id)
        if entry is not None:
            entry.stale = True
        return session

    def remove_all(self) -> None:
        """Drop every session (Kafka's ``removeAllSessions``, share.version turned off)."""
        self.sessions.clear()
        self._members_per_group.clear()
        self.num_partitions = 0

    def maybe_create_session(self, group_id: str, member_id: str,
                             partitions: dict[PartitionKey, CachedSharePartition],
                             connection_id: int) -> ShareSessionKey | None:
        """A new session at epoch 1, or None when the cache is full."""
        if len(self.sessions) >= self.max_entries:
            return None
        key = ShareSessionKey(group_id, member_id)
        session = ShareSession(key, partitions, next_epoch(INITIAL_EPOCH), connection_id)
        self.sessions[key] = session
        self.num_partitions += session.update_cached_size()
        self._members_per_group[group_id] = self._members_per_group.get(group_id, 0) + 1
        self._by_connection[connection_id] = _KeyAndState(key)
        return key

    def register_listener(self, listener: ShareSessionListener) -> None:
        """Kafka's ``registerShareGroupListener``: who hears of members whose connection
        closed."""
        self._listener = listener

    def on_disconnect(self, connection_id: int) -> None:
        """Kafka's ``ClientConnectionDisconnectListener.onDisconnect``: the session this
        connection opened (unless since replaced or closed) is dropped and its member
        counted as left; the group, when no member of it has a session any more, as
        empty."""
        entry = self._by_connection.pop(connection_id, None)
        if entry is None:
            return
        group_id = entry.key.group_id
        if not entry.stale and entry.key in self.sessions:
            if self._listener is not None:
                self._listener.on_member_leave(group_id, entry.key.member_id)
            self.remove(entry.key)
        if self._members_per_group.get(group_id, 0) == 0:
            self._members_per_group.pop(group_id, None)
            if self._listener is not None:
                self._listener.on_group_empty(group_id)

    # --- the contexts -----------------------------------------------------------------------

    def new_context(self, group_id: str, share_fetch_data: Sequence[SharedPartition],
                    to_forget: Sequence[SharedPartition], member_id: str, epoch: int, *,
                    acknowledge_data_present: bool, connection_id: int) -> ShareFetchContext:
        """Kafka's ``SharePartitionManager.newContext`` for a ShareFetch with share session
        ``epoch``; raises :class:`ShareSessionError` (see the module docstring)."""
        key = ShareSessionKey(group_id, member_id)
        if epoch == FINAL_EPOCH:
            if key not in self.sessions:
                raise ShareSessionError(codes.SHARE_SESSION_NOT_FOUND)
            return ShareFetchContext("final", epoch)
        if epoch == INITIAL_EPOCH:
            if acknowledge_data_present:
                raise ShareSessionError(codes.INVALID_REQUEST,
                                        "Acknowledge data present in initial fetch request")
            self.remove(key)
            cached = {part.key: CachedSharePartition(part, False) for part in share_fetch_data}
            if self.maybe_create_session(group_id, member_id, cached, connection_id) is None:
                raise ShareSessionError(codes.SHARE_SESSION_LIMIT_REACHED)
            return ShareFetchContext("full", epoch, share_fetch_data=share_fetch_data)
        session = self.sessions.get(key)
        if session is None:
            raise ShareSessionError(codes.SHARE_SESSION_NOT_FOUND)
        if session.epoch != epoch:
            raise ShareSessionError(codes.INVALID_SHARE_SESSION_EPOCH)
        session.update(share_fetch_data, to_forget)
        self.num_partitions += session.update_cached_size()
        session.epoch = next_epoch(session.epoch)
        return ShareFetchContext("subsequent", epoch, session=session)

    def acknowledge_session_update(self, group_id: str, member_id: str, epoch: int) -> None:
        """Kafka's ``acknowledgeSessionUpdate`` for a ShareAcknowledge: epoch 0 is
        INVALID_SHARE_SESSION_EPOCH, an unknown session SHARE_SESSION_NOT_FOUND, a positive
        epoch must be the session's (it moves on); -1 leaves the closing to the caller."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(codes.INVALID_SHARE_SESSION_EPOCH)
        session = self.sessions.get(ShareSessionKey(group_id, member_id))
        if session is None:
            raise ShareSessionError(codes.SHARE_SESSION_NOT_FOUND)
        if epoch != FINAL_EPOCH:
            if session.epoch != epoch:
                raise ShareSessionError(codes.INVALID_SHARE_SESSION_EPOCH)
            self.num_partitions += session.update_cached_size()
            session.epoch = next_epoch(session.epoch)

    def cached_partitions(self, group_id: str, member_id: str) -> list[SharedPartition]:
        """The partitions of the member's session (none when it has none)."""
        session = self.sessions.get(ShareSessionKey(group_id, member_id))
        if session is None:
            return []
        return [cached.shared() for cached in session.partitions.values()]
