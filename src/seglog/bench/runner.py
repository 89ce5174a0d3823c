"""Runs the selected parts in order and collects their results.

The runner owns the run's settings (:class:`Config`, sized by a :class:`Profile`), the scratch
directory every data file goes into (created on the same file system as ``--dir``, removed at
the end, whatever happens), the shared record values, and the machine limits that the
``limits`` part measures and later parts divide by. Each part is a module with ``NAME``,
``TITLE`` and ``run(ctx) -> PartResult``; a part that raises is reported as an error and the
others still run.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import shutil
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import PART_ORDER
from .data import Unavailable, make_values
from .load import PartLoad, read_load
from .progress import Progress
from .stats import Figure
from .table import STATUS_ERROR, STATUS_UNAVAILABLE, PartResult

# Part names in run order (``limits`` first, so later parts can divide by it) live in the
# package; this maps each to its module.
PART_MODULES = {
    "article": "seglog.bench.article",
    "seglog": "seglog.bench.seglog_io",
    "twins": "seglog.bench.twins",
    "peers": "seglog.bench.peers",
    "limits": "seglog.bench.limits",
    "sendfile": "seglog.bench.sendfile",
    "kafka": "seglog.bench.kafka",
    "scale": "seglog.bench.scale",
    "broker": "seglog.bench.broker",
    "clients": "seglog.bench.clients",
    "cluster": "seglog.bench.cluster",
    "share": "seglog.bench.share",
}

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class Profile:
    """Sizes of one run mode (``quick``, ``standard`` or ``full``).

    ``records`` sizes the seglog, peers and twins (native) parts; ``article_records`` the
    article's experiment; ``pure_records`` the pure twin (it is ~20-100x slower);
    ``slow_peer_records`` caps pure-Python peers (kafka-python; None: no cap);
    ``random_reads`` the random point reads; ``slow_random_reads`` the point reads of codecs
    that parse a whole batch per read; the ``*_bytes`` fields size the file transfers.
    """

    name: str
    runs: int
    records: int
    article_records: int
    article_runs: int
    pure_records: int
    slow_peer_records: int | None
    random_reads: int
    slow_random_reads: int
    sendfile_bytes: int
    limits_write_bytes: int
    limits_read_bytes: int


PROFILES = {
    "quick": Profile("quick", runs=3, records=50_000, article_records=100_000, article_runs=3,
                     pure_records=5_000, slow_peer_records=10_000, random_reads=20_000,
                     slow_random_reads=200,
                     sendfile_bytes=64 * MiB, limits_write_bytes=128 * MiB,
                     limits_read_bytes=128 * MiB),
    "standard": Profile("standard", runs=3, records=500_000, article_records=200_000,
                        article_runs=3, pure_records=20_000, slow_peer_records=100_000,
                        random_reads=100_000,
                        slow_random_reads=1_000, sendfile_bytes=256 * MiB,
                        limits_write_bytes=512 * MiB, limits_read_bytes=512 * MiB),
    "full": Profile("full", runs=3, records=1_000_000, article_records=200_000, article_runs=5,
                    pure_records=50_000, slow_peer_records=None, random_reads=100_000,
                    slow_random_reads=2_000,
                    sendfile_bytes=1 * GiB, limits_write_bytes=1 * GiB,
                    limits_read_bytes=1 * GiB),
}

#: Records per batch wherever a Kafka-style batch is built (the peer survey used 1,000).
BATCH_RECORDS = 1_000
#: A durable sync every this many records in the "sync every 1,000" variants.
SYNC_EVERY_RECORDS = 1_000


@dataclass
class Config:
    """Settings of one ``seglog bench`` invocation (the parsed command line)."""

    mode: str = "standard"
    only: tuple[str, ...] = PART_ORDER
    record_bytes: int = 100
    records: int | None = None
    runs: int | None = None
    dir_path: str | None = None
    out_dir: str = "bench-results"
    json_stdout: bool = False
    charts: bool = True
    progress: bool = True

    @property
    def profile(self) -> Profile:
        """The profile of ``mode`` with ``--records``/``--runs`` applied."""
        base = PROFILES[self.mode]
        changes: dict[str, Any] = {}
        if self.records is not None:
            changes.update(records=self.records, article_records=self.records,
                           pure_records=min(base.pure_records, self.records))
        if self.runs is not None:
            changes.update(runs=self.runs, article_runs=self.runs)
        return Profile(**{**asdict(base), **changes})


@dataclass
class BenchContext:
    """What a part gets: settings, a scratch directory, progress, shared values and limits.

    ``limits`` maps a limit's key (e.g. ``write_ceiling_bytes_per_s``) to its median, filled
    by the limits part or carried over from an earlier results.json (``limits_source`` says
    which). ``scratch(name)`` makes a fresh directory for one part under the run's temp dir.
    """

    config: Config
    profile: Profile
    workdir: Path
    progress: Progress
    limits: dict[str, float] = field(default_factory=dict)
    limits_source: str = ""
    #: Per-run cache for derived inputs (encoded buffers, ...), keyed by the part.
    cache: dict = field(default_factory=dict)
    _values: dict[tuple[int, int], list[bytes]] = field(default_factory=dict)

    @property
    def record_bytes(self) -> int:
        """Size of every record value in bytes."""
        return self.config.record_bytes

    def values(self, count: int) -> list[bytes]:
        """The first ``count`` shared record values (generated once, then sliced)."""
        key = (self.record_bytes, count)
        cached = self._values.get(key)
        if cached is None:
            bigger = [v for (rb, n), v in self._values.items() if rb == self.record_bytes
                      and n >= count]
            cached = bigger[0][:count] if bigger else make_values(count, self.record_bytes)
            self._values[key] = cached
        return cached

    def scratch(self, name: str) -> Path:
        """A new empty directory ``<workdir>/<name>-N`` for data files (removed at the end)."""
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.workdir))
        return path

    def limit(self, key: str) -> float | None:
        """The measured limit called ``key``, or None when it was not measured."""
        return self.limits.get(key)


@dataclass
class BenchRun:
    """The outcome of :func:`run_bench`: results per part plus run metadata."""

    config: Config
    profile: Profile
    parts: list[PartResult]
    machine: dict[str, Any]
    limits: dict[str, float]
    limits_source: str
    started_at: str
    elapsed_s: float
    data_dir: str

    @property
    def failed(self) -> bool:
        """True when a part raised (unavailable parts are not failures)."""
        return any(p.status == STATUS_ERROR for p in self.parts)

    def to_json(self) -> dict:
        """The whole run for results.json."""
        return {
            "tool": "seglog bench",
            "started_at": self.started_at,
            "elapsed_s": self.elapsed_s,
            "config": {k: v for k, v in asdict(self.config).items()},
            "profile": asdict(self.profile),
            "machine": self.machine,
            "data_dir": self.data_dir,
            "limits": {"source": self.limits_source, "values": self.limits},
            "parts": {p.name: p.to_json() for p in self.parts},
        }


def make_workdir(dir_path: str | None) -> tuple[Path, str]:
    """Create the run's scratch directory; returns it and a warning ('' when none).

    The default is a hidden temp dir in the current directory, i.e. on the file system the
    user runs from (the disk a log would live on); ``/tmp`` may be tmpfs on some machines,
    which would measure memory instead of the disk. A tmpfs or ramfs ``--dir`` is allowed but
    warned about, and disk-only measurements (O_DIRECT) then report themselves unavailable.
    """
    base = Path(dir_path) if dir_path else Path.cwd()
    base.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=".seglog-bench-", dir=base))
    fs_type = filesystem_of(workdir).get("fstype", "")
    warning = ""
    if fs_type in ("tmpfs", "ramfs"):
        warning = (f"warning: {workdir} is on {fs_type}: file figures measure memory, not a "
                   "disk; pass --dir on a disk-backed file system")
    return workdir, warning


def filesystem_of(path: Path) -> dict[str, str]:
    """``{"mount", "fstype", "source", "options"}`` of the mount holding ``path`` (Linux)."""
    best: dict[str, str] = {}
    try:
        target = os.path.realpath(path)
        with open("/proc/self/mounts", encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if len(fields) < 4:
                    continue
                mount = fields[1].replace("\\040", " ")
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best.get("mount", "")):
                    best = {"mount": mount, "fstype": fields[2], "source": fields[0],
                            "options": fields[3]}
    except OSError:
        pass
    return best


def describe_machine(workdir: Path) -> dict[str, Any]:
    """CPU, core count, memory, kernel, Python and the data directory's file system."""
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_bytes = 0
    try:
        mem_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    import seglog

    return {
        "cpu": cpu or platform.processor(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": mem_bytes,
        "kernel": platform.release(),
        "system": platform.system(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "seglog": getattr(seglog, "__version__", ""),
        "filesystem": filesystem_of(workdir),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else [],
    }


def load_previous_limits(out_dir: str) -> tuple[dict[str, float], str]:
    """Limits from an earlier ``results.json`` in ``out_dir`` (empty when there is none)."""
    path = Path(out_dir) / "results.json"
    try:
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        values = previous.get("limits", {}).get("values", {})
        if values:
            when = previous.get("started_at", "an earlier run")
            return {k: float(v) for k, v in values.items()}, f"{path} ({when})"
    except (OSError, ValueError, AttributeError, TypeError):
        pass
    return {}, ""


def run_part(name: str, ctx: BenchContext) -> PartResult:
    """Run one part; turn Unavailable into status 'unavailable' and any other error into
    status 'error' (with the traceback in the reason), never raising.

    The machine's load is read at the part's start and end and set on the result (and its
    targets' verdicts) afterwards.
    """
    module = importlib.import_module(PART_MODULES[name])
    ctx.progress.start_part(name)
    load = PartLoad(read_load())
    t0 = time.perf_counter()
    try:
        result = module.run(ctx)
    except Unavailable as exc:
        result = PartResult(name, module.TITLE, status=STATUS_UNAVAILABLE,
                            reason=f"not available: {exc}")
    except Exception as exc:  # noqa: BLE001 - a broken part must not stop the others
        result = PartResult(name, module.TITLE, status=STATUS_ERROR,
                            reason=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    result.elapsed_s = time.perf_counter() - t0
    load.end = read_load()
    result.apply_load(load)
    ctx.progress.clear()
    return result


def run_bench(config: Config, *, on_part=None) -> BenchRun:
    """Run the selected parts; ``on_part(result)`` is called as each part finishes.

    The scratch directory is removed afterwards even when a part fails or the run is
    interrupted.
    """
    profile = config.profile
    progress = Progress(enabled=config.progress)
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    t0 = time.perf_counter()
    workdir, warning = make_workdir(config.dir_path)
    if warning:
        progress.message(warning)
    ctx = BenchContext(config, profile, workdir, progress)
    if "limits" not in config.only:
        ctx.limits, ctx.limits_source = load_previous_limits(config.out_dir)
    results: list[PartResult] = []
    try:
        machine = describe_machine(workdir)
        for name in PART_ORDER:
            if name not in config.only:
                continue
            result = run_part(name, ctx)
            results.append(result)
            if on_part is not None:
                on_part(result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return BenchRun(config, profile, results, machine, dict(ctx.limits), ctx.limits_source,
                    started_at, time.perf_counter() - t0, str(workdir))


def figure_or_none(result: PartResult, key: str) -> Figure | None:
    """``result.figures[key]`` when the part measured it, else None."""
    fig = result.figures.get(key)
    return fig if fig is not None and fig.values else None
