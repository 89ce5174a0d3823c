"""The progress of a bench run on stderr: the steps of each part.

On a terminal it is the CLI's one progress bar (:mod:`seglog.progress`, tqdm): the part, its
elapsed time, the run (``done/total``) and the step after the bar; elsewhere (CI logs, pipes)
each step is printed once on its own line, so the log shows where time went without a flood
of updates. ``--no-progress`` (and ``seglog --quiet``) silence both. stdout is left alone, so
``--json`` output stays parseable.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from ..progress import Progress as Bar
from ..progress import enabled as bar_enabled


class Progress:
    """Reports steps of the running part on ``stream`` (stderr by default).

    ``enabled=False`` silences it (used by tests). Not thread-safe: call from the bench thread.
    """

    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = bar_enabled(self.stream)
        self.part = ""
        self._part_t0 = time.perf_counter()
        self._last_label = ""
        self._bar: Bar | None = None
        self._bar_label = ""

    def start_part(self, name: str) -> None:
        """A new part begins: reset its clock."""
        self.clear()
        self.part = name
        self._part_t0 = time.perf_counter()
        self._last_label = ""

    def step(self, label: str, done: int | None = None, total: int | None = None) -> None:
        """Show ``label`` (and ``done/total`` when given) for the current part."""
        if not self.enabled:
            return
        if self.tty:
            if self._bar is None or label != self._bar_label:
                self.clear()
                self._bar = Bar(self.part, total=total, stream=self.stream)
                self._bar_label = label
                self._bar.note(label)
            self._bar.update_to(done or 0, total)
        elif label != self._last_label:
            # Off a terminal, print each step once (not every run of it).
            elapsed_s = time.perf_counter() - self._part_t0
            count = f" {done}/{total}" if total else ""
            self.stream.write(f"[{self.part} {elapsed_s:5.1f}s] {label}{count}\n")
            self.stream.flush()
        self._last_label = label

    def clear(self) -> None:
        """Remove the bar (terminal only) before a table is printed."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def message(self, text: str) -> None:
        """Print one line (a warning or a note) on the progress stream."""
        if not self.enabled:
            return
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()
