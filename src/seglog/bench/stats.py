"""Figures measured over several runs: the median with the min..max spread, and ratios.

Every number ``seglog bench`` prints is a :class:`Figure`: the values of each run kept in run
order, summarised as the median and the min..max over the runs. A comparison between two
measurements is a ratio computed *per run* (both sides measured in the same run, close in
time) and then summarised the same way, so a noisy machine widens the spread instead of
skewing one side.

This module also holds the clock (``time.perf_counter``) and the CPU clock helpers, and the
number formatting shared by the tables.
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

#: Units the bench uses; a Figure's ``unit`` is one of these (free text is allowed too).
UNIT_RECORDS_PER_S = "records/s"
UNIT_BYTES_PER_S = "bytes/s"
UNIT_RATIO = "x"
UNIT_SECONDS = "s"
UNIT_CPU_S_PER_GB = "cpu s/GB"


@dataclass
class Figure:
    """One measured quantity over several runs (values in run order).

    ``unit`` names what a value is (``records/s``, ``bytes/s``, ``x`` for ratios, ...).
    """

    values: list[float] = field(default_factory=list)
    unit: str = ""

    def add(self, value: float) -> None:
        """Record the value of one more run."""
        self.values.append(float(value))

    @property
    def median(self) -> float:
        """Median over the runs (NaN when there are none)."""
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def min(self) -> float:
        """Smallest run value (NaN when there are none)."""
        return min(self.values) if self.values else float("nan")

    @property
    def max(self) -> float:
        """Largest run value (NaN when there are none)."""
        return max(self.values) if self.values else float("nan")

    def to_json(self) -> dict:
        """``{"unit", "median", "min", "max", "runs"}`` for results.json."""
        return {
            "unit": self.unit,
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "runs": list(self.values),
        }


def ratio_figure(numerator: Figure, denominator: Figure) -> Figure:
    """Per-run ratio ``numerator[i] / denominator[i]`` (both measured in run ``i``)."""
    assert len(numerator.values) == len(denominator.values), "ratio of unpaired runs"
    out = Figure(unit=UNIT_RATIO)
    for a, b in zip(numerator.values, denominator.values):
        out.add(a / b if b else float("nan"))
    return out


def scaled_figure(figure: Figure, factor: float, unit: str) -> Figure:
    """The same runs multiplied by ``factor`` (e.g. records/s -> bytes/s)."""
    return Figure([v * factor for v in figure.values], unit)


# --- clocks ---------------------------------------------------------------------------------


class Stopwatch:
    """Wall time (``perf_counter``) and this process's CPU time of a ``with`` block.

    The garbage collector is disabled inside the block so that a collection triggered by an
    earlier step does not land in a later step's timing; it is re-enabled afterwards.
    Attributes after the block: ``wall_s``, ``cpu_s`` (user + system of this process).
    """

    def __init__(self) -> None:
        self.wall_s = 0.0
        self.cpu_s = 0.0
        self._gc_was_enabled = False

    def __enter__(self) -> "Stopwatch":
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        self._cpu0 = process_cpu_s()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall_s = time.perf_counter() - self._t0
        self.cpu_s = process_cpu_s() - self._cpu0
        if self._gc_was_enabled:
            gc.enable()


def process_cpu_s() -> float:
    """User + system CPU seconds of this process so far (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def time_s(fn: Callable[[], object]) -> float:
    """Wall seconds of one call of ``fn`` (garbage collector off while it runs)."""
    with Stopwatch() as watch:
        fn()
    return watch.wall_s


def best_rate(fn: Callable[[], object], count: int, *, min_time_s: float = 0.05,
              max_reps: int = 50) -> float:
    """``count`` items per second of ``fn``, repeated until ``min_time_s`` elapsed.

    For small, fast kernels (CRC of 1 MiB, one lz4 call) one call is too short to time; this
    repeats the call (at most ``max_reps`` times) and returns the rate of the whole loop.
    """
    reps, elapsed_s = 0, 0.0
    with Stopwatch() as watch:
        while reps < max_reps:
            fn()
            reps += 1
            elapsed_s = time.perf_counter() - watch._t0
            if elapsed_s >= min_time_s:
                break
    return count * reps / watch.wall_s


# --- formatting -----------------------------------------------------------------------------

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float, digits: int = 3) -> str:
    """``3343755 -> '3.34 M'``, ``45307 -> '45.3 k'``, ``12.5 -> '12.5'`` (3 significant digits)."""
    if value != value:  # NaN
        return "n/a"
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{_sig(value / scale, digits)} {prefix}"
    return _sig(value, digits)


def _sig(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    if "e" in text:  # keep plain notation for the table
        text = f"{value:.{max(0, digits - 1)}f}"
    return text


def fmt_rate(figure: Figure) -> str:
    """Median with the spread: ``'3.34 M (2.54..3.42 M)'``."""
    return f"{si(figure.median)} ({spread(figure)})"


def spread(figure: Figure) -> str:
    """``'2.54..3.42 M'``: min..max with one shared prefix where they share it."""
    lo, hi = si(figure.min), si(figure.max)
    lo_num, _, lo_unit = lo.partition(" ")
    hi_num, _, hi_unit = hi.partition(" ")
    if lo_unit == hi_unit:
        return f"{lo_num}..{hi_num}" + (f" {hi_unit}" if hi_unit else "")
    return f"{lo}..{hi}"


def fmt_ratio(figure: Figure) -> str:
    """``'7.1x (5.8..7.3x)'``."""
    if not figure.values:
        return "n/a"
    return f"{_ratio(figure.median)}x ({_ratio(figure.min)}..{_ratio(figure.max)}x)"


def _ratio(value: float) -> str:
    if value != value:
        return "n/a"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_mb_per_s(bytes_per_s: float) -> str:
    """MB/s (10^6 bytes) with 3 significant digits."""
    return _sig(bytes_per_s / 1e6, 3) if bytes_per_s == bytes_per_s else "n/a"


def fmt_gb_per_s(bytes_per_s: float) -> str:
    """GB/s (10^9 bytes) with 3 significant digits."""
    return _sig(bytes_per_s / 1e9, 3) if bytes_per_s == bytes_per_s else "n/a"


def fmt_percent(fraction: float) -> str:
    """``0.4567 -> '46 %'``, small fractions with more digits."""
    if fraction != fraction:
        return "n/a"
    percent = fraction * 100
    if percent >= 10:
        return f"{percent:.0f} %"
    if percent >= 1:
        return f"{percent:.1f} %"
    return f"{percent:.2f} %"


def drop_page_cache_hint(path: str) -> None:
    """Ask the kernel to drop ``path``'s cached pages (advisory; dirty pages stay)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except (AttributeError, OSError):
        pass
    finally:
        os.close(fd)
