"""Part ``scale``: thousands of partitions on one Store, beside a real Kafka broker (issue 14).

A Kafka broker routinely holds thousands of partitions, most of them idle; what one idle
partition costs (memory, descriptors, time to create and to reopen) decides how many one
process can hold. For each size (quick: 100 and 1,000 partitions, the latter cut after its
create by a 3 s budget, and no Kafka side; standard and full: 1,000 and 10,000) a
**subprocess of its own** (so its RSS and descriptors are that size's alone)
runs these steps on one Store in a temp dir under ``--dir`` and reports each as one JSON line
on stdout:

1. ``create``: ``store.create_topic("scale", partitions=N)``, one topic of N partitions. One
   topic rather than N topics of one partition: the issue's targets are stated per
   ``create_topic`` of 1,000 and 10,000 partitions, Kafka's comparison is one topic of N
   partitions too, and N topics would also rewrite the topic registry N times, which is a
   cost of topic count, not of partition count.
2. ``write``: 3 appends of 10 records (``Log.append_batch``) to every partition, with a
   ``Log.roll()`` after each but the last, so every partition has 3 segments.
3. ``close``: ``store.close()`` (a clean shutdown).
4. ``reopen``: ``Store(path)``.
5. ``read``: the first record of every partition, checked against what was written.
6. ``close again``.

Each step reports wall time, CPU time, the process's RSS (``VmRSS`` of /proc/self/status)
after it and its growth over the step, the virtual size (``VmSize``) and the open descriptors
(entries of /proc/self/fd), and per-partition figures. Before anything the subprocess raises
its ``RLIMIT_NOFILE`` soft limit to the hard limit and reports both.

Every size runs under a time budget, and the parent watches the subprocess's RSS against a
cap (a share of the memory available, so a size that would need 13 GiB cannot push other
work on the machine out): a loop step that reaches the budget stops itself and reports how
far it got; a single call that does not return in time (``create_topic``, ``close``,
``Store(path)``) is killed by the parent, and so is a subprocess above the RSS cap. Either way
the step is reported **cut** with the time and memory it had reached (for ``create``, also
how many partition directories existed), and the size's later steps are not run. A step that
raises (e.g. ``OSError: Too many open files`` when a size needs more descriptors than the
limit allows) is reported **failed** with the error: a finding, not a crash of the bench.

Beside it, where ``java`` and the Kafka jars of ``ci/kafka-ref.sh`` are cached (never
downloaded here; the part says when it skips them), a real Kafka broker (:mod:`.kafka`) gets
one topic of N partitions for the same sizes through Kafka's own ``TopicCommand``: the time
until the command returns and until all N partition directories exist in the broker's log
dir, and the broker JVM's RSS and descriptors before and after. In full mode the broker is
then stopped and started again, to set its load time beside seglog's reopen.

The targets of issue 14 are checked as "<=" goals: a :class:`~.table.Target` holds the
*headroom* ``goal / measured`` (met at >= 1), and the table shows the measured value and the
goal as the issue states them. Back of the envelope for the targets: an idle partition at
<= 16 KiB is a few Python objects and no touched file pages; 10,000 of them in 300 MiB leave
~140 MiB for the interpreter and the 10,000 Logs' objects; a create of 10,000 in 10 s is
1 ms per partition, i.e. a handful of file creations and no per-file fsync.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .kafka import proc_status
from .runner import BenchContext
from .stats import UNIT_SECONDS
from .table import PartResult, Table, Target

NAME = "scale"
TITLE = "thousands of partitions on one Store, beside a real Kafka broker"

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

#: The topic every size creates (seglog and Kafka alike).
TOPIC = "scale"
#: Appends per partition in the write step, each of :data:`RECORDS_PER_APPEND` records; a roll
#: follows every append but the last, so a partition ends with this many segments.
APPENDS_PER_PARTITION = 3
RECORDS_PER_APPEND = 10
#: Step names in run order, and how the tables call them.
STEPS = ("create", "write", "close", "reopen", "read", "close_again")
STEP_LABELS = {
    "baseline": "baseline: Python + seglog, empty Store open",
    "create": "create_topic(partitions=N)",
    "write": f"write {APPENDS_PER_PARTITION} x {RECORDS_PER_APPEND} records + "
             f"{APPENDS_PER_PARTITION - 1} rolls per partition",
    "close": "close (clean shutdown)",
    "reopen": "reopen: Store(path)",
    "read": "read the first record of every partition",
    "close_again": "close again",
    "startup": "subprocess start (before any step)",
}
STATUS_OK = "ok"
STATUS_CUT = "cut"
STATUS_FAILED = "failed"
STATUS_NOT_RUN = "not run"


@dataclass(frozen=True)
class ScaleSize:
    """One size: ``partitions`` in one topic, all steps within ``budget_s`` wall seconds
    (counted from the subprocess's start)."""

    partitions: int
    budget_s: float


#: quick mode's budget for 1,000 partitions: enough for the subprocess's start and
#: create_topic (its target, under 1 s); the write step is then cut at the budget, since
#: writing 1,000 partitions takes 15-70 s here (two synced rolls each), over a quick run.
QUICK_LARGE_BUDGET_S = 3.0
#: Sizes and budgets per mode. quick stays well under 30 s in all; the budgets of the large
#: sizes are what the landed code (issue 14's table: 32 s for 1,000) needs to show how far it
#: gets, not what the targets allow. The write step is bound by the syncs of the rolls (two
#: rolls per partition: an msync of both indexes, an fdatasync, a snapshot written
#: atomically, a directory fsync), 30 ms per partition on the shared disk of a loaded
#: machine: full mode gives 10,000 partitions 20 minutes so the reopen is reached.
SIZES = {
    "quick": (ScaleSize(100, 10.0), ScaleSize(1_000, QUICK_LARGE_BUDGET_S)),
    "standard": (ScaleSize(1_000, 60.0), ScaleSize(10_000, 120.0)),
    "full": (ScaleSize(1_000, 300.0), ScaleSize(10_000, 1200.0)),
}
#: Wall seconds Kafka's TopicCommand and its partition directories get per size.
KAFKA_BUDGET_S = {"quick": 60.0, "standard": 120.0, "full": 300.0}
#: Kafka's controller refuses an operation of more than 10,000 metadata records
#: (``QuorumController.MAX_RECORDS_PER_USER_OP``): a topic of 10,000 partitions is 10,001. A
#: size it refuses is created in requests of this many partitions (``--create`` then
#: ``--alter --partitions``), still one topic.
KAFKA_PARTITIONS_PER_REQUEST = 5_000
#: What Kafka's error says when an operation is over that limit.
KAFKA_TOO_LARGE = "excessively large batch"
#: The parent kills a subprocess this long after its budget (a loop step stops itself at the
#: budget and reports how far it got; this is for single calls that do not return).
KILL_GRACE_S = 2.0
#: How often the parent reads the subprocess's output and RSS.
POLL_S = 0.05
#: How often the parent counts the partition directories during the create step (a scandir
#: of up to 10,000 entries: cheap at this rate).
DIRS_SAMPLE_S = 1.0
#: The RSS cap of a size's subprocess: this share of MemAvailable, at most RSS_CAP_BYTES_MAX.
RSS_CAP_SHARE = 0.4
RSS_CAP_BYTES_MAX = 6 * GiB
#: Targets of issue 14 (seconds, bytes, descriptors).
TARGET_CREATE_S = {1_000: 1.0, 10_000: 10.0}
TARGET_IDLE_PARTITION_RSS_BYTES = 16 * KiB
#: "No descriptor" per idle partition; a bounded file cache may keep a few open, so up to one
#: per hundred partitions passes.
TARGET_IDLE_PARTITION_FDS = 0.01
TARGET_IDLE_10K_RSS_BYTES = 300 * MiB
TARGET_REOPEN_10K_S = 5.0
#: The size the "10,000 idle partitions" and reopen targets are stated for.
TARGET_LARGE_PARTITIONS = 10_000


# --- measuring a process ---------------------------------------------------------------------


def open_fds(pid: int | str = "self") -> int:
    """Entries of /proc/<pid>/fd (for ``self`` this counts the listing's own descriptor too,
    the same before and after a step); 0 when the process is gone."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def nofile_limit_of(pid: int) -> int | None:
    """The soft ``Max open files`` of process ``pid`` (/proc/<pid>/limits), None if unknown."""
    try:
        with open(f"/proc/{pid}/limits", encoding="ascii") as f:
            for line in f:
                if line.startswith("Max open files"):
                    soft = line.split()[3]
                    return None if soft == "unlimited" else int(soft)
    except (OSError, ValueError, IndexError):
        pass
    return None


def raise_nofile_soft_limit() -> dict[str, int]:
    """Raise this process's RLIMIT_NOFILE soft limit to its hard limit; returns
    ``{"soft_before", "soft", "hard"}`` (``RLIM_INFINITY`` as -1)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return {"soft_before": before, "soft": soft, "hard": hard}


@contextmanager
def nofile_raised() -> Iterator[dict[str, int]]:
    """This process's soft RLIMIT_NOFILE at its hard limit inside the block (so a process
    started there inherits it), the old soft limit restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    info = raise_nofile_soft_limit()
    try:
        yield info
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def memory_available_bytes() -> int:
    """``MemAvailable`` of /proc/meminfo (0 when unknown)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * KiB
    except (OSError, ValueError, IndexError):
        pass
    return 0


def rss_cap_bytes() -> int:
    """The RSS a size's subprocess may reach before it is killed (see :data:`RSS_CAP_SHARE`)."""
    available = memory_available_bytes()
    return min(RSS_CAP_BYTES_MAX, int(available * RSS_CAP_SHARE)) if available else \
        RSS_CAP_BYTES_MAX


# --- the subprocess of one size --------------------------------------------------------------


def record_value(partition: int, append_index: int, record_index: int,
                 record_bytes: int) -> bytes:
    """The value of record ``record_index`` of append ``append_index`` to ``partition``:
    its coordinates, padded with ``.`` to ``record_bytes`` (so a read can be checked); never
    shorter than the coordinates (18 bytes), whatever ``record_bytes`` says."""
    head = b"p%08d a%02d r%02d " % (partition, append_index, record_index)
    return head.ljust(record_bytes, b".")[:max(record_bytes, len(head))]


class _Child:
    """The steps of one size, in the subprocess; every report is one JSON line on stdout."""

    def __init__(self, store_dir: str, partitions: int, record_bytes: int, budget_s: float,
                 t0: float):
        self.store_dir = store_dir
        self.partitions = partitions
        self.record_bytes = record_bytes
        self.deadline = t0 + budget_s
        self.out = sys.stdout

    def emit(self, event: dict) -> None:
        self.out.write(json.dumps(event) + "\n")
        self.out.flush()

    @staticmethod
    def sample() -> dict[str, Any]:
        status = proc_status()
        times = os.times()
        return {"rss_bytes": status["rss_bytes"], "vm_bytes": status["vm_bytes"],
                "hwm_bytes": status["hwm_bytes"], "fds": open_fds(),
                "cpu_s": times.user + times.system, "t": time.perf_counter()}

    def run(self) -> None:
        self.emit({"event": "nofile", **raise_nofile_soft_limit()})
        import seglog
        from seglog.store import Store

        self.emit({"event": "backend", "name": getattr(seglog, "backend", "")})
        state: dict[str, Any] = {"store": Store(self.store_dir)}
        base = self.sample()
        self.emit({"event": "baseline", **base})
        for name in STEPS:
            if not self.step(name, state):
                return

    def step(self, name: str, state: dict) -> bool:
        """Run step ``name``; True when it finished ok (the next step may run)."""
        self.emit({"event": "start", "step": name})
        before = self.sample()
        status, done, error = STATUS_OK, None, ""
        try:
            done = getattr(self, "_" + name)(state)
        except _Cut as cut:
            status, done = STATUS_CUT, cut.done
        except Exception as exc:  # noqa: BLE001 - a failing step is a finding, reported
            status, error = STATUS_FAILED, f"{type(exc).__name__}: {exc}".replace(
                self.store_dir, "<store>")
        after = self.sample()
        self.emit({"event": "step", "step": name, "status": status, "done": done,
                   "error": error, "wall_s": after["t"] - before["t"],
                   "cpu_s": after["cpu_s"] - before["cpu_s"],
                   "rss_before": before["rss_bytes"], "rss_after": after["rss_bytes"],
                   "vm_after": after["vm_bytes"], "hwm_after": after["hwm_bytes"],
                   "fds_before": before["fds"], "fds_after": after["fds"]})
        return status == STATUS_OK

    def _check_budget(self, done: int) -> None:
        if time.perf_counter() > self.deadline:
            raise _Cut(done)

    def _create(self, state: dict) -> int:
        state["topic"] = state["store"].create_topic(TOPIC, partitions=self.partitions)
        return self.partitions

    def _write(self, state: dict) -> int:
        topic = state["topic"]
        for partition in range(self.partitions):
            self._check_budget(partition)
            log = topic.log(partition)
            for append_index in range(APPENDS_PER_PARTITION):
                log.append_batch([record_value(partition, append_index, i, self.record_bytes)
                                  for i in range(RECORDS_PER_APPEND)])
                if append_index < APPENDS_PER_PARTITION - 1:
                    log.roll()
        return self.partitions

    def _close(self, state: dict) -> None:
        state.pop("topic", None)
        state.pop("store").close()

    def _reopen(self, state: dict) -> None:
        from seglog.store import Store

        state["store"] = Store(self.store_dir)

    def _read(self, state: dict) -> int:
        topic = state["store"].topic(TOPIC)
        for partition in range(self.partitions):
            self._check_budget(partition)
            record = next(iter(topic.log(partition).records(0, end=1)))
            expected = record_value(partition, 0, 0, self.record_bytes)
            if bytes(record.value) != expected:
                raise AssertionError(f"partition {partition}: read {bytes(record.value)[:40]!r}"
                                     f", wrote {expected[:40]!r}")
        return self.partitions

    def _close_again(self, state: dict) -> None:
        state.pop("store").close()


class _Cut(Exception):
    """A loop step reached the budget after ``done`` partitions."""

    def __init__(self, done: int):
        super().__init__(done)
        self.done = done


def child_main(argv: list[str] | None = None) -> int:
    """Entry of the subprocess (``python -m seglog.bench.scale --child ...``)."""
    t0 = time.perf_counter()
    parser = argparse.ArgumentParser(prog="seglog.bench.scale")
    parser.add_argument("--child", action="store_true", required=True)
    parser.add_argument("--store-dir", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--budget-s", type=float, required=True)
    args = parser.parse_args(argv)
    _Child(args.store_dir, args.partitions, args.record_bytes, args.budget_s, t0).run()
    return 0


# --- the parent: one subprocess per size -----------------------------------------------------


@dataclass
class SizeResult:
    """What one size's subprocess reported (plus what the parent saw of it)."""

    partitions: int
    budget_s: float
    nofile: dict[str, int] = field(default_factory=dict)
    backend: str = ""
    baseline: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    peak_rss_bytes: int = 0
    rss_cap_bytes: int = 0
    elapsed_s: float = 0.0
    #: The step that started last (its report may be missing if the subprocess was killed).
    started: str | None = None
    #: Most partition directories the parent saw during the create step (sampled every
    #: :data:`DIRS_SAMPLE_S`): how far a create got before it failed or was cut.
    create_dirs_seen: int = 0

    def step(self, name: str) -> dict[str, Any] | None:
        """The report of step ``name`` (None when it was not run)."""
        for row in self.steps:
            if row["step"] == name:
                return row
        return None

    def ok(self, name: str) -> dict[str, Any] | None:
        """The report of step ``name`` when it finished ok, else None."""
        row = self.step(name)
        return row if row is not None and row["status"] == STATUS_OK else None


def measure_size(size: ScaleSize, *, base_dir: str | os.PathLike, record_bytes: int = 100,
                 rss_cap: int | None = None, kill_grace_s: float = KILL_GRACE_S,
                 nofile_hard: int | None = None, progress=None) -> SizeResult:
    """Run the steps of ``size`` in a new subprocess on a Store in a temp dir under
    ``base_dir`` (removed afterwards) and collect its reports; never raises for what happens
    in the subprocess (cut and failed steps are reported as such).

    ``rss_cap`` (default :func:`rss_cap_bytes`) kills the subprocess above that RSS;
    ``nofile_hard`` sets the subprocess's RLIMIT_NOFILE (soft and hard) before it starts, to
    see a size meet a lower descriptor limit; ``progress`` is a :class:`~.progress.Progress`.
    """
    result = SizeResult(size.partitions, size.budget_s,
                        rss_cap_bytes=rss_cap if rss_cap is not None else rss_cap_bytes())
    store_dir = tempfile.mkdtemp(prefix=f"scale-{size.partitions}-", dir=base_dir)
    cmd = [sys.executable, "-m", "seglog.bench.scale", "--child", "--store-dir", store_dir,
           "--partitions", str(size.partitions), "--record-bytes", str(record_bytes),
           "--budget-s", repr(size.budget_s)]
    env = dict(os.environ)
    # The subprocess imports this very seglog (a worktree's src/ included).
    src_dir = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src_dir, env.get("PYTHONPATH")) if p)

    def limit_fds() -> None:
        if nofile_hard is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile_hard, nofile_hard))

    stderr_file = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=stderr_file, env=env, preexec_fn=limit_fds)
        killed = False
        try:
            killed = _watch(proc, result, size, store_dir, kill_grace_s=kill_grace_s,
                            progress=progress, t0=t0)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if not killed and (proc.returncode != 0 or not result.steps):
            stderr_file.seek(0)
            tail = stderr_file.read().decode("utf-8", "replace")[-1500:]
            running = _running_step(result)
            if running is not None:
                result.steps.append(_failed_row(running, f"subprocess exited with "
                                                         f"{proc.returncode}: {tail}"))
    finally:
        stderr_file.close()
        result.elapsed_s = time.perf_counter() - t0
        shutil.rmtree(store_dir, ignore_errors=True)
    create = result.step("create")
    if create is not None and create["status"] == STATUS_FAILED and not create.get("done"):
        # The Store removes what a failed create made; the parent's samples say how far it
        # got (a lower bound).
        create["done_seen"] = result.create_dirs_seen
    _fill_not_run(result)
    return result


def _running_step(result: SizeResult) -> str | None:
    """The step that started but did not report (``startup`` before the first)."""
    started = result.started
    reported = {row["step"] for row in result.steps}
    if started is None:
        return "startup" if "startup" not in reported else None
    return started if started not in reported else None


def _failed_row(step: str, error: str) -> dict[str, Any]:
    return {"step": step, "status": STATUS_FAILED, "error": error, "done": None}


def _fill_not_run(result: SizeResult) -> None:
    reported = {row["step"] for row in result.steps}
    stopped = any(row["status"] != STATUS_OK for row in result.steps)
    for name in STEPS:
        if name not in reported and stopped:
            result.steps.append({"step": name, "status": STATUS_NOT_RUN, "done": None,
                                 "error": ""})


def _watch(proc: subprocess.Popen, result: SizeResult, size: ScaleSize, store_dir: str, *,
           kill_grace_s: float, progress, t0: float) -> bool:
    """Read the subprocess's JSON lines until it exits; kill it past its budget (+ grace) or
    above the RSS cap, reporting the running step as cut. True when it killed it."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    pending = b""
    step_t0 = t0
    deadline = t0 + size.budget_s + kill_grace_s
    dirs_sampled_at = 0.0
    while True:
        ready, _, _ = select.select([fd], [], [], POLL_S)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break  # the subprocess closed stdout: it is exiting
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    event = json.loads(line)
                    if event["event"] == "start":
                        step_t0 = time.perf_counter()
                        result.started = event["step"]
                        if progress is not None:
                            progress.step(f"{size.partitions:,} partitions: "
                                          f"{STEP_LABELS[event['step']]}")
                    _apply(result, event)
        status = proc_status(proc.pid)
        result.peak_rss_bytes = max(result.peak_rss_bytes, status["rss_bytes"])
        now = time.perf_counter()
        if result.started == "create" and now - dirs_sampled_at >= DIRS_SAMPLE_S:
            dirs_sampled_at = now
            result.create_dirs_seen = max(result.create_dirs_seen, _partition_dirs(store_dir))
        why = ""
        if status["rss_bytes"] > result.rss_cap_bytes:
            why = (f"killed at the RSS cap ({status['rss_bytes'] / MiB:,.0f} MiB > "
                   f"{result.rss_cap_bytes / MiB:,.0f} MiB)")
        elif now > deadline:
            why = (f"killed at the time budget: {size.budget_s:g} s for the size + "
                   f"{kill_grace_s:g} s grace")
        if why:
            running = _running_step(result)
            fds = open_fds(proc.pid)
            proc.kill()
            if running is not None:
                row = {"step": running, "status": STATUS_CUT, "error": why,
                       "wall_s": now - step_t0, "rss_after": status["rss_bytes"],
                       "vm_after": status["vm_bytes"], "fds_after": fds, "done": None,
                       "cpu_s": None}
                if running == "create":
                    row["done"] = max(result.create_dirs_seen, _partition_dirs(store_dir))
                before = result.baseline
                if running == "create" and before:
                    row["rss_before"] = before["rss_bytes"]
                    row["fds_before"] = before["fds"]
                result.steps.append(row)
            return True
        if proc.poll() is not None and not ready:
            break
    return False


def _apply(result: SizeResult, event: dict) -> None:
    kind = event["event"]
    if kind == "nofile":
        result.nofile = {k: event[k] for k in ("soft_before", "soft", "hard")}
    elif kind == "backend":
        result.backend = event["name"]
    elif kind == "baseline":
        result.baseline = {k: event[k] for k in ("rss_bytes", "vm_bytes", "fds")}
    elif kind == "step":
        result.steps.append({k: v for k, v in event.items() if k != "event"})


def _partition_dirs(store_dir: str) -> int:
    """Partition directories of :data:`TOPIC` that exist in ``store_dir`` now."""
    prefix = TOPIC + "-"
    try:
        return sum(1 for e in os.scandir(store_dir)
                   if e.name.startswith(prefix) and e.name[len(prefix):].isdigit())
    except OSError:
        return 0


# --- Kafka ------------------------------------------------------------------------------------


@dataclass
class KafkaSize:
    """Kafka's figures for one size (seconds None when not reached)."""

    partitions: int
    topic: str
    command_s: float | None = None
    all_dirs_s: float | None = None
    dirs_found: int = 0
    rss_before: int = 0
    rss_after: int = 0
    vm_after: int = 0
    fds_before: int = 0
    fds_after: int = 0
    error: str = ""
    #: How the topic was created when one request was refused (else '').
    note: str = ""


@dataclass
class KafkaScale:
    """What the Kafka side measured."""

    version: str = ""
    skipped: str = ""
    start_s: float | None = None
    list_s: float | None = None
    nofile: int | None = None
    rss_idle: int = 0
    fds_idle: int = 0
    sizes: list[KafkaSize] = field(default_factory=list)
    restart: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def _kafka_dirs(data_dir: Path, topic: str) -> int:
    prefix = topic + "-"
    try:
        return sum(1 for e in os.scandir(data_dir)
                   if e.name.startswith(prefix) and e.name[len(prefix):].isdigit())
    except OSError:
        return 0


def _tool_error(done: subprocess.CompletedProcess) -> str:
    text = (done.stdout + "\n" + done.stderr).strip()
    for line in text.splitlines():
        if "Error while executing" in line or "Exception" in line:
            return line.strip()[:400]
    return text[-400:] or f"exit {done.returncode}"


def measure_kafka(ctx: BenchContext, sizes: tuple[ScaleSize, ...], *,
                  restart: bool) -> KafkaScale:
    """Kafka's side for ``sizes`` on one fresh broker: create one topic of N partitions per
    size with ``TopicCommand``, time it and watch the broker's RSS and descriptors; with
    ``restart``, stop the broker (clean) and start it again holding every topic. Never raises
    for Kafka's failures (they are in the returned figures)."""
    from .kafka import BrokerError, KafkaBroker, find_kafka

    out = KafkaScale()
    ref, why = find_kafka()
    if ref is None:
        out.skipped = why
        return out
    out.version = ref.version
    budget_s = KAFKA_BUDGET_S.get(ctx.config.mode, KAFKA_BUDGET_S["standard"])
    scratch = Path(ctx.scratch("scale-kafka"))
    broker = KafkaBroker(ref, scratch)
    try:
        ctx.progress.step("Kafka: formatting the data dir")
        broker.format()
        ctx.progress.step("Kafka: starting the broker")
        with nofile_raised():  # the broker inherits the raised soft limit
            out.start_s = broker.start()
        pid = broker.pid
        assert pid is not None  # started
        out.nofile = nofile_limit_of(pid)
        ctx.progress.step("Kafka: TopicCommand --list (the tool's fixed cost)")
        t0 = time.perf_counter()
        listed = ref.run_tool("org.apache.kafka.tools.TopicCommand",
                              ["--bootstrap-server", broker.bootstrap, "--list"],
                              run_dir=scratch, timeout_s=budget_s)
        out.list_s = time.perf_counter() - t0 if listed.returncode == 0 else None
        out.rss_idle = proc_status(pid)["rss_bytes"]
        out.fds_idle = open_fds(pid)
        for size in sizes:
            out.sizes.append(_kafka_create(ctx, ref, broker, scratch, size.partitions,
                                           budget_s))
        if restart:
            total = sum(s.dirs_found for s in out.sizes)
            ctx.progress.step(f"Kafka: clean stop and restart with {total:,} partitions")
            t0 = time.perf_counter()
            broker.stop()
            stop_s = time.perf_counter() - t0
            with nofile_raised():
                start_s = broker.start(timeout_s=max(budget_s, 180.0))
            pid = broker.pid
            assert pid is not None  # started
            out.restart = {"partitions": total, "stop_s": stop_s, "start_s": start_s,
                           "rss_after": proc_status(pid)["rss_bytes"],
                           "vm_after": proc_status(pid)["vm_bytes"],
                           "fds_after": open_fds(pid)}
    except (BrokerError, OSError, subprocess.SubprocessError) as exc:
        out.error = f"{type(exc).__name__}: {str(exc)[-800:]}"
    finally:
        broker.stop()
    return out


def _kafka_create(ctx: BenchContext, ref, broker, scratch: Path, partitions: int,
                  budget_s: float) -> KafkaSize:
    topic = f"{TOPIC}-{partitions}"
    pid = broker.pid
    row = KafkaSize(partitions, topic, rss_before=proc_status(pid)["rss_bytes"],
                    fds_before=open_fds(pid))
    def topic_command(action: str, count: int, timeout_s: float):
        args = ["--bootstrap-server", broker.bootstrap, action, "--topic", topic,
                "--partitions", str(count)]
        if action == "--create":
            args += ["--replication-factor", "1"]
        try:
            done = ref.run_tool("org.apache.kafka.tools.TopicCommand", args, run_dir=scratch,
                                timeout_s=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            return f"TopicCommand {action} did not return in {budget_s:g} s (cut)"
        return _tool_error(done) if done.returncode != 0 else ""

    ctx.progress.step(f"Kafka: TopicCommand --create {partitions:,} partitions")
    t0 = time.perf_counter()
    row.error = topic_command("--create", partitions, budget_s)
    if KAFKA_TOO_LARGE in row.error:
        # Refused in one request: the same topic in several (see KAFKA_PARTITIONS_PER_REQUEST).
        refused = row.error
        steps = list(range(KAFKA_PARTITIONS_PER_REQUEST, partitions,
                           KAFKA_PARTITIONS_PER_REQUEST)) + [partitions]
        row.note = (f"one request refused ({refused}); created as --create "
                    f"{steps[0]:,} then --alter --partitions "
                    f"{', '.join(f'{n:,}' for n in steps[1:])}, timed from there")
        ctx.progress.step(f"Kafka: {partitions:,} partitions in requests of "
                          f"{KAFKA_PARTITIONS_PER_REQUEST:,}")
        t0 = time.perf_counter()
        row.error = ""
        for index, count in enumerate(steps):
            row.error = topic_command("--create" if index == 0 else "--alter", count,
                                      t0 + budget_s - time.perf_counter())
            if row.error:
                break
    if not row.error or not row.error.endswith("(cut)"):
        row.command_s = time.perf_counter() - t0
    if not row.error:
        # The command returns once the controller committed the topic; the broker creates
        # each partition's log (its directory) when it applies that metadata.
        deadline = t0 + budget_s
        while True:
            row.dirs_found = _kafka_dirs(broker.data_dir, topic)
            if row.dirs_found >= partitions:
                row.all_dirs_s = time.perf_counter() - t0
                break
            if time.perf_counter() > deadline:
                row.error = (f"{row.dirs_found:,} of {partitions:,} partition directories "
                             f"after {budget_s:g} s (cut)")
                break
            time.sleep(0.02)
    else:
        row.dirs_found = _kafka_dirs(broker.data_dir, topic)
    status = proc_status(pid)
    row.rss_after, row.vm_after, row.fds_after = status["rss_bytes"], status["vm_bytes"], \
        open_fds(pid)
    return row


# --- the part ---------------------------------------------------------------------------------


def run(ctx: BenchContext) -> PartResult:
    """Measure the sizes of the run's mode, and Kafka's figures when its jars are cached."""
    sizes = SIZES.get(ctx.config.mode, SIZES["standard"])
    # Quick mode leaves Kafka's TopicCommand side out: its broker start, tool JVMs and stop
    # took about 25 s of a quick run (the kafka part still starts a real broker then).
    return run_scale(ctx, sizes, kafka=ctx.config.mode != "quick")


def run_scale(ctx: BenchContext, sizes: tuple[ScaleSize, ...], *, kafka: bool = True,
              rss_cap: int | None = None) -> PartResult:
    """The part for explicit ``sizes`` (tests use tiny ones); ``kafka=False`` leaves the
    broker out."""
    cap = rss_cap if rss_cap is not None else rss_cap_bytes()
    result = PartResult(NAME, TITLE, params={
        "sizes": ", ".join(f"{s.partitions:,}" for s in sizes),
        "budgets_s": ", ".join(f"{s.budget_s:g}" for s in sizes),
        "appends_per_partition": APPENDS_PER_PARTITION,
        "records_per_append": RECORDS_PER_APPEND, "record_bytes": ctx.record_bytes,
        "rss_cap_mib": round(cap / MiB)})
    base_dir = ctx.scratch(NAME)
    measured: list[SizeResult] = []
    for size in sizes:
        ctx.progress.step(f"{size.partitions:,} partitions: starting the subprocess")
        measured.append(measure_size(size, base_dir=base_dir, record_bytes=ctx.record_bytes,
                                     rss_cap=cap, progress=ctx.progress))
    first = measured[0] if measured else None
    if first is not None:
        result.params["backend"] = first.backend
        if first.nofile:
            result.params["nofile_soft_before"] = first.nofile["soft_before"]
            result.params["nofile"] = first.nofile["soft"]
    _figures(result, measured)
    result.tables.append(_steps_table(measured))
    kafka_side = None
    if not kafka:
        result.notes.append("Kafka's TopicCommand side not run (quick mode leaves it out; "
                            "the standard and full modes run it).")
    if kafka:
        kafka_side = measure_kafka(ctx, sizes, restart=ctx.config.mode == "full")
        if kafka_side.skipped:
            result.notes.append(f"Kafka's figures skipped: {kafka_side.skipped} (the jars are "
                                "never downloaded by the bench).")
        else:
            result.params["kafka"] = kafka_side.version
            result.tables.append(_kafka_table(kafka_side))
            _kafka_figures(result, kafka_side)
    result.tables.append(_targets_table(result, measured))
    result.notes += _sentences(measured, kafka_side)
    bars = {}
    for done_size in measured:
        for name in ("create", "reopen"):
            key = f"seglog.{done_size.partitions}.{name}.wall_s"
            if key in result.figures:
                bars[f"seglog {name} {done_size.partitions:,}"] = key
    if kafka_side is not None:
        for row in kafka_side.sizes:
            if row.all_dirs_s is not None:
                bars[f"Kafka create {row.partitions:,}"] = f"kafka.{row.partitions}.create.wall_s"
    if bars:
        result.charts.append({"title": "scale: seconds per step (one topic of N partitions)",
                              "unit": UNIT_SECONDS, "bars": bars})
    return result


def _figures(result: PartResult, measured: list[SizeResult]) -> None:
    for size in measured:
        for row in size.steps:
            if row["status"] != STATUS_OK:
                continue
            key = f"seglog.{size.partitions}.{row['step']}"
            result.figure(f"{key}.wall_s", UNIT_SECONDS).add(row["wall_s"])
            result.figure(f"{key}.rss_bytes", "bytes").add(row["rss_after"])
            result.figure(f"{key}.rss_growth_bytes", "bytes").add(
                row["rss_after"] - row["rss_before"])
            result.figure(f"{key}.fds", "descriptors").add(row["fds_after"])
        result.figure(f"seglog.{size.partitions}.peak_rss_bytes", "bytes").add(
            size.peak_rss_bytes)


def _kafka_figures(result: PartResult, side: KafkaScale) -> None:
    if side.start_s is not None:
        result.figure("kafka.broker_start_s", UNIT_SECONDS).add(side.start_s)
    for row in side.sizes:
        if row.all_dirs_s is not None:
            key = f"kafka.{row.partitions}"
            result.figure(f"{key}.create.wall_s", UNIT_SECONDS).add(row.all_dirs_s)
            if row.command_s is not None:
                result.figure(f"{key}.command_s", UNIT_SECONDS).add(row.command_s)
            result.figure(f"{key}.rss_bytes", "bytes").add(row.rss_after)
            result.figure(f"{key}.fds", "descriptors").add(row.fds_after)
    if side.restart:
        result.figure("kafka.restart.start_s", UNIT_SECONDS).add(side.restart["start_s"])


# --- formatting -------------------------------------------------------------------------------


def _mib(value: float | None) -> str:
    return "" if value is None else f"{value / MiB:,.1f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def _per_partition_ms(wall_s: float | None, partitions: int) -> str:
    return "" if wall_s is None else f"{wall_s / partitions * 1e3:.3f}"


def _signed(value: float, fmt: str) -> str:
    return ("+" if value >= 0 else "") + format(value, fmt)


def _status_cell(row: dict, partitions: int) -> str:
    status = row["status"]
    if status == STATUS_CUT:
        done = row.get("done")
        made = f", {done:,}/{partitions:,} partitions done" if done is not None else ""
        return f"CUT ({row.get('error') or 'time budget'}{made})"
    if status == STATUS_FAILED:
        seen = row.get("done_seen")
        made = f" (after >= {seen:,}/{partitions:,} partitions were made)" if seen else ""
        hwm = row.get("hwm_after")
        peak = f", peak RSS {hwm / MiB:,.0f} MiB" if hwm else ""
        return f"FAILED: {row.get('error', '')[:300]}{made}{peak}"
    return status


def _steps_table(measured: list[SizeResult]) -> Table:
    table = Table("seglog: one topic of N partitions on one Store, one subprocess per size "
                  "(figures after each step; growth over the step)",
                  ["N", "step", "status", "wall s", "ms/partition", "cpu s", "RSS MiB",
                   "RSS growth MiB", "growth KiB/partition", "virtual GiB", "open fds",
                   "fds growth/partition"])
    for size in measured:
        n = size.partitions
        if size.baseline:
            table.add(f"{n:,}", STEP_LABELS["baseline"], "ok", "", "", "",
                      _mib(size.baseline["rss_bytes"]), "", "",
                      f"{size.baseline['vm_bytes'] / GiB:.2f}", str(size.baseline["fds"]), "")
        for row in size.steps:
            wall = row.get("wall_s")
            rss_after = row.get("rss_after")
            rss_before = row.get("rss_before")
            growth = (rss_after - rss_before) if rss_after is not None and \
                rss_before is not None else None
            # Per partition over the partitions the step got through (all unless cut).
            count = row.get("done") or n
            fds_growth = (row["fds_after"] - row["fds_before"]) \
                if row.get("fds_after") is not None and row.get("fds_before") is not None \
                else None
            table.add(
                f"{n:,}", STEP_LABELS[row["step"]], _status_cell(row, n), _seconds(wall),
                _per_partition_ms(wall, count) if wall is not None else "",
                "" if row.get("cpu_s") is None else _seconds(row["cpu_s"]),
                _mib(rss_after), "" if growth is None else _signed(growth / MiB, ",.1f"),
                "" if growth is None else _signed(growth / KiB / count, ",.1f"),
                "" if row.get("vm_after") is None else f"{row['vm_after'] / GiB:.2f}",
                "" if row.get("fds_after") is None else str(row["fds_after"]),
                "" if fds_growth is None else _signed(fds_growth / count, ".2f"))
    limits = {f"{s.nofile.get('soft', '?')}" for s in measured if s.nofile}
    peak = ", ".join(f"{s.partitions:,}: {s.peak_rss_bytes / MiB:,.0f} MiB" for s in measured)
    table.note = (f"RLIMIT_NOFILE soft limit raised to the hard limit "
                  f"({', '.join(sorted(limits)) or '?'}) in each subprocess. Peak RSS seen by "
                  f"the parent: {peak}. A cut or failed step stops its size; later steps are "
                  "not run. A failed step's time includes what seglog did after the error (a "
                  "failed create closes and removes the partitions it made).")
    return table


def _kafka_table(side: KafkaScale) -> Table:
    table = Table(f"Apache Kafka {side.version}: one topic of N partitions via TopicCommand "
                  "(broker JVM figures from /proc/<pid>)",
                  ["N", "TopicCommand returns s", "all partition dirs s", "status",
                   "RSS before MiB", "RSS after MiB", "growth KiB/partition", "virtual GiB",
                   "fds before", "fds after", "fds growth/partition"])
    for row in side.sizes:
        growth = row.rss_after - row.rss_before
        fds_growth = row.fds_after - row.fds_before
        count = row.dirs_found or row.partitions
        if not row.error:
            status = "ok"
        elif row.error.endswith("(cut)"):
            status = f"CUT: {row.error}"
        else:
            status = f"FAILED: {row.error}"
        table.add(f"{row.partitions:,}", _seconds(row.command_s), _seconds(row.all_dirs_s),
                  status,
                  _mib(row.rss_before), _mib(row.rss_after),
                  _signed(growth / KiB / count, ",.1f"), f"{row.vm_after / GiB:.2f}",
                  str(row.fds_before), str(row.fds_after), _signed(fds_growth / count, ".2f"))
    if side.restart:
        r = side.restart
        table.add(f"{r['partitions']:,} (restart)", f"stop {_seconds(r['stop_s'])}",
                  f"start {_seconds(r['start_s'])}", "ok", "", _mib(r["rss_after"]), "",
                  f"{r['vm_after'] / GiB:.2f}", "", str(r["fds_after"]), "")
    notes = [f"{row.partitions:,}: {row.note}." for row in side.sizes if row.note]
    notes += [f"Broker start to ready: {_seconds(side.start_s)} s; TopicCommand --list (JVM "
             f"start + connect, the tool's fixed cost inside every 'returns' figure): "
             f"{_seconds(side.list_s)} s; broker idle: {side.rss_idle / MiB:,.0f} MiB RSS, "
             f"{side.fds_idle} fds; its open-files limit: {side.nofile}."]
    if side.restart:
        notes.append("restart: SIGTERM (controlled shutdown) until exit, then start until "
                     "'Kafka Server started' (logs loaded) with every topic above.")
    if side.error:
        notes.append(f"Kafka error: {side.error}")
    table.note = " ".join(notes)
    return table


def _headroom(goal: float, measured: float | None) -> float:
    """``goal / measured`` for a "<=" goal (NaN when not measured; large when measured is 0)."""
    if measured is None or measured != measured:
        return float("nan")
    if measured <= 0:
        return 1e9
    return goal / measured


def _targets_table(result: PartResult, measured: list[SizeResult]) -> Table:
    table = Table("Targets (issue 14), checked as goal / measured >= 1",
                  ["target", "measured", "goal", "verdict"])
    by_n = {s.partitions: s for s in measured}

    def add(label: str, goal_text: str, goal: float, value: float | None, shown: str) -> None:
        target = Target(label, goal_text, _headroom(goal, value), 1.0)
        result.targets.append(target)
        table.add(label, shown, goal_text, target)

    def not_reached(size: SizeResult, step: str) -> str:
        row = size.step(step)
        if row is None:
            return "not run"
        if row["status"] == STATUS_OK:
            return ""
        return _status_cell(row, size.partitions)[:120]

    for n, goal in TARGET_CREATE_S.items():
        size = by_n.get(n)
        label = f"create_topic({n:,} partitions)"
        if size is None:
            table.add(label, "not measured in this mode", f"<= {goal:g} s", "not measured")
            continue
        row = size.ok("create")
        add(label, f"<= {goal:g} s", goal, row["wall_s"] if row else None,
            f"{row['wall_s']:.2f} s" if row else not_reached(size, "create"))
    # The idle empty partition: the largest size whose create finished.
    done = [s for s in measured if s.ok("create")]
    if done:
        size = max(done, key=lambda s: s.partitions)
        row = size.ok("create")
        assert row is not None  # done holds the sizes whose create finished
        per_rss = (row["rss_after"] - row["rss_before"]) / size.partitions
        per_fds = (row["fds_after"] - row["fds_before"]) / size.partitions
        add(f"RSS per idle empty partition (create of {size.partitions:,})", "<= 16 KiB",
            TARGET_IDLE_PARTITION_RSS_BYTES, per_rss, f"{per_rss / KiB:,.1f} KiB")
        add(f"descriptors per idle empty partition (create of {size.partitions:,})",
            f"no descriptor (<= {TARGET_IDLE_PARTITION_FDS:g})", TARGET_IDLE_PARTITION_FDS,
            per_fds, f"{per_fds:.2f}")
    else:
        table.add("RSS and descriptors per idle empty partition", "no create finished",
                  "<= 16 KiB, no descriptor", "MISSED")
        result.targets.append(Target("RSS per idle empty partition", "<= 16 KiB",
                                     float("nan"), 1.0))
    large = by_n.get(TARGET_LARGE_PARTITIONS)
    if large is None:
        for label, goal_text in (("10,000 idle partitions: process RSS", "<= 300 MiB"),
                                 ("reopen 10,000 partitions (3 segments each)", "<= 5 s")):
            table.add(label, "not measured in this mode", goal_text, "not measured")
    else:
        row = large.ok("create")
        add("10,000 idle partitions: process RSS after create", "<= 300 MiB",
            TARGET_IDLE_10K_RSS_BYTES, row["rss_after"] if row else None,
            f"{row['rss_after'] / MiB:,.0f} MiB" if row else not_reached(large, "create"))
        row = large.ok("reopen")
        add("10,000 idle partitions: process RSS after reopen", "<= 300 MiB",
            TARGET_IDLE_10K_RSS_BYTES, row["rss_after"] if row else None,
            f"{row['rss_after'] / MiB:,.0f} MiB" if row else not_reached(large, "reopen"))
        add("reopen 10,000 partitions (3 segments each)", "<= 5 s", TARGET_REOPEN_10K_S,
            row["wall_s"] if row else None,
            f"{row['wall_s']:.2f} s" if row else not_reached(large, "reopen"))
        per_fds = ((row["fds_after"] - row["fds_before"]) / large.partitions) if row else None
        add("descriptors per idle partition after reopen (10,000)",
            f"no descriptor (<= {TARGET_IDLE_PARTITION_FDS:g})", TARGET_IDLE_PARTITION_FDS,
            per_fds, f"{per_fds:.2f}" if row else not_reached(large, "reopen"))
    return table


def _sentences(measured: list[SizeResult], side: KafkaScale | None) -> list[str]:
    out = []
    for size in measured:
        create = size.ok("create")
        if create:
            per_ms = create["wall_s"] / size.partitions * 1e3
            per_kib = (create["rss_after"] - create["rss_before"]) / size.partitions / KiB
            out.append(f"create_topic({size.partitions:,}) took {create['wall_s']:.2f} s "
                       f"({per_ms:.2f} ms and {per_kib:,.0f} KiB of RSS per partition; "
                       f"{create['cpu_s']:.2f} s of it on the CPU, the rest waiting).")
        reopen = size.ok("reopen")
        if reopen:
            out.append(f"Reopening {size.partitions:,} partitions of "
                       f"{APPENDS_PER_PARTITION} segments took {reopen['wall_s']:.2f} s and "
                       f"left {reopen['fds_after']:,} descriptors open.")
        for row in size.steps:
            if row["status"] in (STATUS_CUT, STATUS_FAILED):
                out.append(f"{size.partitions:,} partitions: step {row['step']} "
                           f"{_status_cell(row, size.partitions)}.")
                break
    if side is not None and not side.skipped:
        for kafka_row in side.sizes:
            ours = next((s for s in measured if s.partitions == kafka_row.partitions), None)
            create = ours.ok("create") if ours else None
            if kafka_row.all_dirs_s is not None and create:
                out.append(f"At {kafka_row.partitions:,} partitions Kafka had every partition's "
                           f"directory {kafka_row.all_dirs_s:.1f} s after TopicCommand started "
                           f"(its JVM start included) vs {create['wall_s']:.2f} s for "
                           f"seglog's create_topic; the broker grew by "
                           f"{(kafka_row.rss_after - kafka_row.rss_before) / MiB:,.0f} MiB RSS "
                           f"and {kafka_row.fds_after - kafka_row.fds_before:,} descriptors.")
    return out


if __name__ == "__main__":
    raise SystemExit(child_main())
