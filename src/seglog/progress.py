"""Progress of long work on a terminal, silence in a pipe: one library for the whole CLI.

Long work (recovery of a large log at start, compaction, ``seglog dump --verify`` of a big
directory, ``seglog bench``, ``seglog cluster up``) reports through :func:`progress`. The bar
is drawn with tqdm on stderr only when stderr is a terminal and the caller was not asked to be
quiet (``--quiet``, or :func:`set_quiet`); otherwise every call is a no-op, so a pipe, a log
file or a test sees no control characters. tqdm rather than rich: it is one small pure-Python
module with no dependencies of its own, draws on a plain stderr without taking the terminal
over, and costs nothing when disabled (rich's live displays would own the console that the
broker's log lines also go to).

Modules below the CLI (the storage's recovery, the cleaner) never import this module: they
take an ``on_progress(done, total)`` callback, and the command that runs them passes
:meth:`Progress.update_to` of a bar from here.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any, TextIO

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Silence every bar of this process (``--quiet``), or allow them again."""
    global _quiet
    _quiet = quiet


def enabled(stream: TextIO | None = None) -> bool:
    """True when a bar would be drawn: ``stream`` (default stderr) is a terminal and the
    process is not quiet."""
    stream = sys.stderr if stream is None else stream
    if _quiet:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """One bar (or nothing, when disabled). Use as a context manager; :meth:`update` adds
    done units, :meth:`update_to` sets the count, :meth:`set_total` changes the total,
    :meth:`note` changes the text after the bar."""

    def __init__(self, description: str, *, total: float | None = None, unit: str = "it",
                 unit_scale: bool = False, stream: TextIO | None = None,
                 force: bool | None = None) -> None:
        self._stream = sys.stderr if stream is None else stream
        on = enabled(self._stream) if force is None else force
        self._bar: Any = None
        if on:
            from tqdm import tqdm
            self._bar = tqdm(total=total, desc=description, unit=unit, unit_scale=unit_scale,
                             file=self._stream, leave=False, dynamic_ncols=True)

    @property
    def active(self) -> bool:
        """True when a bar is being drawn."""
        return self._bar is not None

    def update(self, done: float = 1) -> None:
        """``done`` more units finished."""
        if self._bar is not None:
            self._bar.update(done)

    def update_to(self, done: float, total: float | None = None) -> None:
        """``done`` units of ``total`` (when given) finished: the shape of an
        ``on_progress(done, total)`` callback."""
        if self._bar is not None:
            if total is not None and total != self._bar.total:
                self._bar.total = total
            self._bar.update(done - self._bar.n)

    def set_total(self, total: float | None) -> None:
        """Change the total (for work whose size is learnt on the way)."""
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def note(self, text: str) -> None:
        """Show ``text`` after the bar (what is being worked on)."""
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)

    def close(self) -> None:
        """Remove the bar (it leaves no line behind)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def progress(description: str, *, total: float | None = None, unit: str = "it",
             unit_scale: bool = False, stream: TextIO | None = None) -> Progress:
    """A :class:`Progress` bar for ``description``: drawn only on a terminal and when not
    quiet. ``with progress("verifying", total=n, unit="B", unit_scale=True) as bar: ...``."""
    return Progress(description, total=total, unit=unit, unit_scale=unit_scale, stream=stream)
