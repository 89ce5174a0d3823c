"""Test-only negative controls: switches that put a known replication or transaction bug
back, by name.

A scenario test proves its checker can see data loss by running once with a bug restored and
expecting the checker to fail (research R§3.7, R§6.5). The switches come from the environment
only, never from a configuration file or a request: ``SEGLOG_TEST_BREAK=<flag>[,<flag>...]``.
Every module that honours a flag asks :func:`enabled` at the point of the decision, so the
code path with the bug is one ``if`` next to the correct one.

The flags (:data:`FLAGS`):

- ``truncate_to_hw``: a follower truncates to its own high watermark instead of asking the
  leader where its epoch ends (Kafka before KIP-101; :mod:`seglog.cluster.truncation`).
- ``ack_on_append``: an ``acks=all`` produce is answered after the leader's local append,
  without waiting for the ISR (the replica manager).
- ``skip_epoch_check``: a leader serves a request whose leader epochs are stale: no KIP-320
  fencing of ``CurrentLeaderEpoch``, and a follower's Fetch whose ``LastFetchedEpoch`` ends
  earlier on the leader gets records instead of ``DivergingEpoch`` (the replica manager). The
  first alone cannot lose data (the second covers it), so the control breaks both; S9 shows
  the checker catching it.
- ``elect_most_recent``: the controller elects a replica it should not (the controller).
- ``read_committed_sees_aborted``: a read_committed Fetch is answered without its aborted
  transactions, so the consumer cannot drop their records (the server's Fetch; the storage
  read itself is unchanged, so the last stable offset still holds).

The first time a flag is seen enabled it is logged once at WARNING, so a broker running with a
bug on says so in its log. An unknown name in the variable is logged once and ignored.
Thread-safe.
"""

from __future__ import annotations

import logging
import os
import threading

ENV_VAR = "SEGLOG_TEST_BREAK"
"""The environment variable that holds the enabled flags, comma-separated."""

FLAGS = frozenset({"truncate_to_hw", "ack_on_append", "skip_epoch_check", "elect_most_recent",
                   "read_committed_sees_aborted"})
"""Every flag a seglog module honours; :func:`enabled` refuses any other name."""

_log = logging.getLogger(__name__)
_lock = threading.Lock()
# The names already logged, so each is logged once per process however often it is asked.
_logged: set[str] = set()


def enabled(name: str) -> bool:
    """Whether the negative control ``name`` is switched on in ``SEGLOG_TEST_BREAK``.

    Reads the environment on every call (cheap: one dict lookup and a split), so a test may set
    the variable for a child process or with ``monkeypatch`` and see it at once. Logs each
    enabled flag once per process at WARNING, and each unknown name in the variable once.
    Raises ValueError for a ``name`` that is not in :data:`FLAGS` (a typo in the caller would
    otherwise make a control silently never fire).
    """
    if name not in FLAGS:
        raise ValueError(f"unknown test break flag {name!r}; known: {sorted(FLAGS)}")
    raw = os.environ.get(ENV_VAR, "")
    if not raw:
        return False
    names = {part.strip() for part in raw.split(",") if part.strip()}
    _log_once(names)
    return name in names


def _log_once(names: set[str]) -> None:
    with _lock:
        fresh = names - _logged
        _logged.update(fresh)
    for flag in sorted(fresh):
        if flag in FLAGS:
            _log.warning("%s=%s: negative control %r is ON; this process has a known "
                         "bug on purpose (tests only)", ENV_VAR,
                         os.environ.get(ENV_VAR, ""), flag)
        else:
            _log.warning("%s: unknown flag %r ignored (known: %s)", ENV_VAR, flag,
                         ", ".join(sorted(FLAGS)))
