"""Share sessions (KIP-932): Kafka 4.4's ShareSessionCache / newContext /
acknowledgeSessionUpdate rules, on :mod:`seglog.server.share_sessions` directly."""

from __future__ import annotations

import uuid

import pytest

from seglog import error_codes as codes
from seglog.server.share_sessions import (FINAL_EPOCH, INITIAL_EPOCH, ShareSessionCache,
                                          ShareSessionError, ShareSessionKey, SharedPartition,
                                          next_epoch)

T = uuid.UUID(int=7)
P0 = SharedPartition(T, "t", 0)
P1 = SharedPartition(T, "t", 1)
UNKNOWN = SharedPartition(uuid.UUID(int=9), None, 0)


def _context(cache: ShareSessionCache, epoch: int, parts=(), forget=(), *, acks=False,
             member: str = "m", connection: int = 1):
    return cache.new_context("g", list(parts), list(forget), member, epoch,
                             acknowledge_data_present=acks, connection_id=connection)


def _error(fn, *args, **kwargs) -> int:
    with pytest.raises(ShareSessionError) as info:
        fn(*args, **kwargs)
    return info.value.error_code


def test_next_epoch_wraps_and_final_stays():
    assert next_epoch(0) == 1
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(-1) == -1


def test_initial_epoch_opens_a_session_answered_in_full():
    cache = ShareSessionCache(10)
    context = _context(cache, INITIAL_EPOCH, [P0, UNKNOWN])
    assert context.kind == "full"
    erroneous, valid = context.erroneous_and_valid()
    assert erroneous == [(UNKNOWN, codes.UNKNOWN_TOPIC_ID)] and valid == [P0]
    assert context.respond([(P0.key, False, 0)]) == (codes.NONE, None)  # all answered
    assert cache.get(ShareSessionKey("g", "m")).epoch == 1


def test_acknowledgements_in_an_initial_request_are_invalid():
    cache = ShareSessionCache(10)
    assert _error(_context, cache, INITIAL_EPOCH, [P0], acks=True) == codes.INVALID_REQUEST
    assert cache.get(ShareSessionKey("g", "m")) is None


def test_subsequent_epochs_must_follow_and_answer_only_what_changed():
    cache = ShareSessionCache(10)
    _context(cache, INITIAL_EPOCH, [P0])
    assert _error(_context, cache, 2) == codes.INVALID_SHARE_SESSION_EPOCH
    context = _context(cache, 1, [P1])  # P1 added
    assert context.kind == "subsequent"
    _, valid = context.erroneous_and_valid()
    assert valid == [P0, P1]
    # P0 had nothing: left out; P1 was just added: answered once.
    assert context.respond([(P0.key, False, 0), (P1.key, False, 0)]) == (codes.NONE,
                                                                          {P1.key})
    context = _context(cache, 2)
    assert context.respond([(P0.key, False, 0), (P1.key, False, 0)]) == (codes.NONE, set())
    context = _context(cache, 3, forget=[P0])
    _, valid = context.erroneous_and_valid()
    assert valid == [P1]
    assert context.respond([(P1.key, True, 0)]) == (codes.NONE, {P1.key})


def test_a_failed_partition_is_answered_again():
    cache = ShareSessionCache(10)
    _context(cache, INITIAL_EPOCH, [P0])
    context = _context(cache, 1)
    assert context.respond([(P0.key, False, codes.NOT_LEADER_OR_FOLLOWER)]) == (
        codes.NONE, {P0.key})
    context = _context(cache, 2)
    assert context.respond([(P0.key, False, 0)]) == (codes.NONE, {P0.key})


def test_unknown_session_and_final_epoch():
    cache = ShareSessionCache(10)
    assert _error(_context, cache, 1) == codes.SHARE_SESSION_NOT_FOUND
    assert _error(_context, cache, FINAL_EPOCH) == codes.SHARE_SESSION_NOT_FOUND
    _context(cache, INITIAL_EPOCH, [P0])
    context = _context(cache, FINAL_EPOCH, acks=True)
    assert context.kind == "final" and context.erroneous_and_valid() == ([], [])


def test_the_cache_limit_is_share_session_limit_reached():
    cache = ShareSessionCache(1)
    _context(cache, INITIAL_EPOCH, [P0], member="a")
    assert _error(_context, cache, INITIAL_EPOCH, [P0], member="b") == \
        codes.SHARE_SESSION_LIMIT_REACHED
    # Reopening one's own session replaces it (room is made first).
    assert _context(cache, INITIAL_EPOCH, [P0], member="a").kind == "full"


def test_share_acknowledge_epochs():
    cache = ShareSessionCache(10)
    assert _error(cache.acknowledge_session_update, "g", "m", 0) == \
        codes.INVALID_SHARE_SESSION_EPOCH
    assert _error(cache.acknowledge_session_update, "g", "m", 1) == \
        codes.SHARE_SESSION_NOT_FOUND
    _context(cache, INITIAL_EPOCH, [P0])
    cache.acknowledge_session_update("g", "m", 1)
    assert _error(cache.acknowledge_session_update, "g", "m", 1) == \
        codes.INVALID_SHARE_SESSION_EPOCH
    cache.acknowledge_session_update("g", "m", 2)
    cache.acknowledge_session_update("g", "m", FINAL_EPOCH)  # the caller closes it
    assert _context(cache, 3).kind == "subsequent"


class _Listener:
    def __init__(self) -> None:
        self.events: list[tuple[str, ...]] = []

    def on_member_leave(self, group_id: str, member_id: str) -> None:
        self.events.append(("leave", group_id, member_id))

    def on_group_empty(self, group_id: str) -> None:
        self.events.append(("empty", group_id))


def test_a_closed_connection_ends_its_session_once():
    cache = ShareSessionCache(10)
    listener = _Listener()
    cache.register_listener(listener)
    _context(cache, INITIAL_EPOCH, [P0], member="a", connection=1)
    _context(cache, INITIAL_EPOCH, [P0], member="b", connection=2)
    cache.on_disconnect(1)
    assert listener.events == [("leave", "g", "a")]
    assert cache.get(ShareSessionKey("g", "a")) is None
    # b's session was closed by a request first: its connection closing releases nothing.
    cache.remove(ShareSessionKey("g", "b"))
    cache.on_disconnect(2)
    assert listener.events == [("leave", "g", "a"), ("empty", "g")]
    cache.on_disconnect(3)  # a connection without a session
    assert len(listener.events) == 2
