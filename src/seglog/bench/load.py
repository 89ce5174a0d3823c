"""The machine's load while a bench part runs: 1-minute load average and CPU count.

A figure measured while other processes compete for the CPUs is lower than the same figure
on a quiet machine, so every part records the load at its start and end, prints it beside
its elapsed time, and a target it misses while the machine was busy says so in its verdict
("MISSED under load 3.1") instead of reading as a plain miss.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: The machine counts as busy when the 1-minute load average exceeds this share of its CPUs
#: (on 2 CPUs: above 1.0, i.e. more than one CPU's worth of runnable work besides the bench's
#: own share is likely).
BUSY_LOAD_PER_CPU = 0.5


@dataclass(frozen=True)
class LoadSample:
    """One reading: the 1-minute load average and the number of logical CPUs."""

    load_1m: float
    cpus: int

    @property
    def busy(self) -> bool:
        """True when the load average exceeds ``BUSY_LOAD_PER_CPU`` times the CPU count."""
        return self.load_1m > self.cpus * BUSY_LOAD_PER_CPU

    def to_json(self) -> dict:
        """``{"load_1m", "cpus"}`` for results.json."""
        return {"load_1m": self.load_1m, "cpus": self.cpus}


def read_load() -> LoadSample | None:
    """The load now, or None where the system has no load average (not on Linux/Unix)."""
    try:
        load_1m = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    return LoadSample(round(load_1m, 2), os.cpu_count() or 1)


@dataclass
class PartLoad:
    """The load at a part's start and at its end (``end`` is None until the part finished)."""

    start: LoadSample | None
    end: LoadSample | None = None

    @property
    def samples(self) -> list[LoadSample]:
        """The readings taken so far (start, then end)."""
        return [s for s in (self.start, self.end) if s is not None]

    @property
    def busy(self) -> bool:
        """True when the machine was busy at the part's start or at its end."""
        return any(s.busy for s in self.samples)

    @property
    def peak_1m(self) -> float:
        """The higher of the two 1-minute load averages (NaN without readings)."""
        samples = self.samples
        return max(s.load_1m for s in samples) if samples else float("nan")

    def describe(self) -> str:
        """``'load 0.82 -> 3.10 on 2 CPUs'`` (``'load unknown'`` without readings)."""
        samples = self.samples
        if not samples:
            return "load unknown"
        loads = " -> ".join(f"{s.load_1m:.2f}" for s in samples)
        busy = ", busy" if self.busy else ""
        return f"load {loads} on {samples[0].cpus} CPUs{busy}"

    def to_json(self) -> dict:
        """``{"start": {...}, "end": {...}, "busy": bool}`` for results.json."""
        return {"start": self.start.to_json() if self.start else None,
                "end": self.end.to_json() if self.end else None,
                "busy": self.busy}
