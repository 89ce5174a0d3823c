"""Test-only negative controls: switches that put a known replication or transaction bug
back, by name, handed to the modules that honour them as one immutable object.

A scenario test proves its checker can see data loss by running once with a bug restored and
expecting the checker to fail (docs/cluster.md, "Negative controls"). The switches are a seam,
not ambient state: a :class:`TestBreaks` is built once, from the hidden, test-only options of
``seglog serve`` (``--test-break NAME``, repeatable, and ``--test-expose-zk-session``) or by
a test that constructs a :class:`~seglog.server.broker.Broker` in process, and is passed by
constructor to every module that honours a flag (the broker's state, the replica manager, the
fetcher, the controller; the truncation rules take it as an argument). Nothing reads it from
the environment, a configuration file or a request, and the default,
:data:`NO_TEST_BREAKS`, has every flag off. Each module asks :meth:`TestBreaks.enabled` at
the point of the decision, so the code path with the bug is one ``if`` next to the correct
one.

The flags (:data:`FLAGS`):

- ``truncate_to_hw``: a follower truncates to its own high watermark instead of asking the
  leader where its epoch ends (Kafka before KIP-101; :mod:`seglog.cluster.truncation`, the
  fetcher).
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

Besides the flags, one test hook: ``expose_zk_session`` makes a cluster broker keep its
ZooKeeper session's id and password in its data directory, so that a fault injector can
expire exactly that session (``LocalCluster.expire_session``; docs/cluster.md §5.1).

Immutable, hence thread-safe. A broker built with any flag or hook on logs it once at WARNING
when it starts (:meth:`TestBreaks.warn_if_any`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
__all__ = ["FLAGS", "TestBreaks", "NO_TEST_BREAKS"]

FLAGS = frozenset({"truncate_to_hw", "ack_on_append", "skip_epoch_check", "elect_most_recent",
                   "read_committed_sees_aborted"})
"""Every flag a seglog module honours; :class:`TestBreaks` refuses any other name."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TestBreaks:
    """The negative controls (``flags``, names from :data:`FLAGS`) and test hooks
    (``expose_zk_session``) one broker runs with; see the module docstring.

    Raises ValueError at construction for a flag that is not in :data:`FLAGS` (a typo would
    otherwise make a control silently never fire)."""

    __test__ = False  # a name pytest would otherwise try to collect where it is imported

    flags: frozenset[str] = frozenset()
    """The negative controls switched on."""
    expose_zk_session: bool = False
    """Whether a cluster broker writes its ZooKeeper session to its data directory."""

    def __post_init__(self) -> None:
        flags = frozenset(self.flags)
        unknown = sorted(flags - FLAGS)
        if unknown:
            raise ValueError(f"unknown test break {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(sorted(FLAGS))}")
        object.__setattr__(self, "flags", flags)

    @classmethod
    def of(cls, *flags: str, expose_zk_session: bool = False) -> "TestBreaks":
        """``TestBreaks.of("ack_on_append")``: the same as ``TestBreaks(frozenset(flags))``."""
        return cls(frozenset(flags), expose_zk_session=expose_zk_session)

    def enabled(self, name: str) -> bool:
        """Whether the negative control ``name`` is on. Raises ValueError for a ``name`` that
        is not in :data:`FLAGS` (a typo in the caller)."""
        if name not in FLAGS:
            raise ValueError(f"unknown test break {name!r}; known: {', '.join(sorted(FLAGS))}")
        return name in self.flags

    @property
    def any(self) -> bool:
        """Whether any flag or hook is on."""
        return bool(self.flags) or self.expose_zk_session

    def command_line(self) -> list[str]:
        """The ``seglog serve`` options that build an equal object in a broker process."""
        options: list[str] = []
        for flag in sorted(self.flags):
            options += ["--test-break", flag]
        if self.expose_zk_session:
            options.append("--test-expose-zk-session")
        return options

    def warn_if_any(self, who: str) -> None:
        """Log at WARNING, once per call, that ``who`` (e.g. ``"broker 1"``) runs with known
        bugs on purpose; nothing when every flag and hook is off."""
        for flag in sorted(self.flags):
            _log.warning("%s: negative control %r is ON; this process has a known bug on "
                         "purpose (tests only)", who, flag)
        if self.expose_zk_session:
            _log.warning("%s: test hook expose_zk_session is ON: the ZooKeeper session's "
                         "password is written to the data directory (tests only)", who)


NO_TEST_BREAKS = TestBreaks()
"""Every flag and hook off: what every product path gets unless a test says otherwise."""

