"""Repeated identical warnings printed once, then summarised: the log of a retry loop.

A loop that retries every second (the replica fetcher while its leader is down, the marker
sender, a controller waiting on ZooKeeper) would print the same line every second, and the
operator would scroll past hundreds of them to find what changed. A :class:`RepeatLimiter`
prints the first occurrence of a line at once and then, while the same line keeps coming
(same logger, same message template, same key arguments), at most one summary per interval:
the line again, followed by ``(repeated N times in the last M s)``. A line that comes back
after a quiet interval prints at once, plain. A library's own logger (kazoo's reconnect
warnings) gets the same limit through :func:`limit_logger` (a :class:`RepeatFilter`).

The key is the logger's name, the template and ``key`` (default: every argument), so
``"cannot connect to %s: %s"`` for broker 1 and for broker 2 are two lines, each printed.
A suppressed repeat is never formatted (only an object argument's text is taken, for the
key; pass ``key`` to avoid even that).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

#: Seconds between two prints of the same repeated line (its summary).
REPEAT_INTERVAL_S_DEFAULT = 30.0
#: What a summary adds to the repeated line (%-args: the count, the seconds).
SUMMARY = " (repeated %d times in the last %.0f s)"
#: Distinct lines remembered at once; the least recently seen is forgotten beyond this.
KEYS_MAX = 1024


@dataclass
class _Seen:
    """One line: when it was last printed and how often it came (unprinted) since."""

    printed_at: float
    suppressed: int = 0


_PLAIN = (str, int, float, bool, bytes, type(None))


def _key_of(args: tuple[Any, ...]) -> Hashable:
    # An exception (or any object) compares by identity: its text is what repeats.
    return tuple(a if isinstance(a, _PLAIN) else str(a) for a in args)


class RepeatLimiter:
    """Prints a repeated line once, then ``(repeated N times in the last M s)`` at most
    every ``interval_s``. ``clock`` (monotonic seconds) is there for tests. Thread-safe: the
    controller's thread and the event loop may share one."""

    def __init__(self, *, interval_s: float = REPEAT_INTERVAL_S_DEFAULT,
                 clock: Callable[[], float] = time.monotonic,
                 keys_max: int = KEYS_MAX) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._keys_max = keys_max
        self._seen: OrderedDict[Hashable, _Seen] = OrderedDict()
        self._lock = threading.Lock()

    def log(self, logger: logging.Logger, level: int, msg: str, *args: Any,
            key: Hashable | None = None, exc_info: Any = None) -> bool:
        """Log ``msg % args`` on ``logger`` at ``level`` unless it is a repeat within the
        interval; ``key`` names what makes two lines the same (default: ``args``, objects by
        their text). Returns True when a line was printed."""
        if not logger.isEnabledFor(level):
            return False
        due, repeats, since_s = self.admit(
            (logger.name, msg, _key_of(args) if key is None else key))
        if not due:
            return False
        if repeats:
            logger.log(level, msg + SUMMARY, *args, repeats, since_s, exc_info=exc_info)
        else:
            logger.log(level, msg, *args, exc_info=exc_info)
        return True

    def admit(self, ident: Hashable) -> tuple[bool, int, float]:
        """Whether the line ``ident`` is printed now, and if so how many times it came since
        its last print (0: news, print it plain) over how many seconds."""
        now = self._clock()
        with self._lock:
            seen = self._seen.get(ident)
            if seen is None:
                self._seen[ident] = _Seen(printed_at=now)
                while len(self._seen) > self._keys_max:
                    self._seen.popitem(last=False)
                return True, 0, 0.0
            self._seen.move_to_end(ident)
            if now - seen.printed_at < self.interval_s:
                seen.suppressed += 1
                return False, 0, 0.0
            # Due: this one and the suppressed ones since the last print, or (when none was
            # suppressed: the line came back after a quiet interval) plain news.
            repeats = seen.suppressed + 1 if seen.suppressed else 0
            since_s = now - seen.printed_at
            seen.printed_at, seen.suppressed = now, 0
            return True, repeats, since_s

    def warning(self, logger: logging.Logger, msg: str, *args: Any,
                key: Hashable | None = None) -> bool:
        """:meth:`log` at WARNING."""
        return self.log(logger, logging.WARNING, msg, *args, key=key)

    def info(self, logger: logging.Logger, msg: str, *args: Any,
             key: Hashable | None = None) -> bool:
        """:meth:`log` at INFO."""
        return self.log(logger, logging.INFO, msg, *args, key=key)

    def clear(self) -> None:
        """Forget every line (the next of each prints at once)."""
        with self._lock:
            self._seen.clear()


class RepeatFilter(logging.Filter):
    """The same limit for a library's own log lines (kazoo's reconnect warnings): installed
    on a logger (:func:`limit_logger`), it drops a repeated record at ``level`` or above
    and adds the summary to the record that is due."""

    def __init__(self, limiter: RepeatLimiter, level: int = logging.WARNING) -> None:
        super().__init__()
        self.limiter = limiter
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a repeat within the interval; the record (with its summary) otherwise."""
        if record.levelno < self.level or not isinstance(record.args, tuple):
            return True  # (a mapping of args: not limited, its summary could not format)
        args = record.args
        due, repeats, since_s = self.limiter.admit(
            (record.name, str(record.msg), _key_of(args)))
        if due and repeats:
            # A record without args is not %-formatted: its own '%' must stay literal.
            text = str(record.msg) if record.args else str(record.msg).replace("%", "%%")
            record.msg = text + SUMMARY
            record.args = (*args, repeats, since_s) if record.args else (repeats, since_s)
        return due


def limit_logger(name: str, level: int = logging.WARNING) -> None:
    """Limit the repeats of logger ``name``'s records at ``level`` and above (once per
    logger: calling again changes nothing)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, RepeatFilter) for f in logger.filters):
        logger.addFilter(RepeatFilter(REPEATS, level))


#: The process's limiter, shared by the loops that retry (fetcher, marker sender, peers).
REPEATS = RepeatLimiter()
