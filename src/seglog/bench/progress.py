"""A dependency-free progress line on stderr for the long steps of a bench run.

On a terminal the line is rewritten in place (``\\r``) with the part, the step, the run and
the elapsed time; elsewhere (CI logs, pipes) each step is printed once on its own line, so the
log shows where time went without a flood of updates. stdout is left alone, so ``--json``
output stays parseable.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Reports steps of the running part on ``stream`` (stderr by default).

    ``enabled=False`` silences it (used by tests). Not thread-safe: call from the bench thread.
    """

    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.part = ""
        self._part_t0 = time.perf_counter()
        self._width = 0
        self._last_label = ""

    def start_part(self, name: str) -> None:
        """A new part begins: reset its clock."""
        self.part = name
        self._part_t0 = time.perf_counter()
        self._last_label = ""

    def step(self, label: str, done: int | None = None, total: int | None = None) -> None:
        """Show ``label`` (and ``done/total`` when given) for the current part."""
        if not self.enabled:
            return
        elapsed_s = time.perf_counter() - self._part_t0
        count = f" {done}/{total}" if total else ""
        text = f"[{self.part} {elapsed_s:5.1f}s] {label}{count}"
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
            self.stream.flush()
        elif label != self._last_label:
            # Off a terminal, print each step once (not every run of it).
            self.stream.write(text + "\n")
            self.stream.flush()
        self._last_label = label

    def clear(self) -> None:
        """Erase the in-place line (terminal only) before a table is printed."""
        if self.enabled and self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def message(self, text: str) -> None:
        """Print one line (a warning or a note) on the progress stream."""
        if not self.enabled:
            return
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()
