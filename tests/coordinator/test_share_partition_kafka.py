"""seglog's share partition against Kafka 4.4's own ``SharePartition`` (from the 4.4 jars),
operation by operation: random scripts of acquisitions (whole batches, record_limit mode,
read_committed with aborted transactions, logs with compaction holes), acknowledgements of
every type (valid and not), member releases, lock expiry, persister writes that succeed or
fail, the DLQ's ARCHIVING and the log start moving are run through both, and every answer
and the whole cached state after each step must be the same.

Kafka's class runs in ``java/SharePartitionRef.java`` (compiled at test time) with a manual
clock, timer, persister and DLQ manager; :class:`Driver` runs the same line format on
:mod:`seglog.coordinator.share_partition`.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from seglog import error_codes as codes
from seglog.bench.kafka import find_kafka
from seglog.errors import IllegalStateError
from seglog.coordinator.share_partition import (
    AckBatch,
    FetchedBatch,
    RecordState,
    ShareAcquireMode,
    SharePartition,
    SharePartitionConfig,
    ShareState,
    StateBatch,
)

pytestmark = pytest.mark.kafka

SOURCE = Path(__file__).resolve().parent / "java" / "SharePartitionRef.java"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """``(java, classpath)`` running ``kafka.server.share.SharePartitionRef``."""
    ref, why = find_kafka()
    required = os.environ.get("SEGLOG_REQUIRE_KAFKA", "") not in ("", "0")
    javac = None
    if ref is not None:
        javac = shutil.which("javac") or str(Path(ref.java).with_name("javac"))
        if not Path(javac).exists():
            javac, why = None, "needs javac (a JDK)"
    if ref is None or javac is None:
        if required:
            pytest.fail(why)
        pytest.skip(why)
    out = tmp_path_factory.mktemp("share_partition_ref")
    subprocess.run([javac, "-cp", ref.classpath, "-d", str(out), str(SOURCE)], check=True,
                   timeout=180, capture_output=True)
    # Kafka logs its errors (failed writes, ...) to stdout otherwise: the answers only.
    (out / "log4j2.properties").write_text("status = off\nrootLogger.level = off\n")
    return ref.java, f"{out}:{ref.classpath}"


def run_kafka(reference: tuple[str, str], lines: list[str]) -> list[str]:
    java, classpath = reference
    log_config = Path(classpath.split(":", 1)[0]) / "log4j2.properties"
    done = subprocess.run([java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                           f"-Dlog4j2.configurationFile={log_config}",
                           "-cp", classpath, "kafka.server.share.SharePartitionRef"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True,
                          timeout=300)
    out = [line for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr[-3000:]
    return out


class Driver:
    """The script's line format run on seglog's SharePartition; ``run(line)`` answers as
    SharePartitionRef.java does."""

    def __init__(self) -> None:
        self.config = SharePartitionConfig()
        self.sp: SharePartition | None = None

    @property
    def partition(self) -> SharePartition:
        assert self.sp is not None
        return self.sp

    def dump(self) -> str:
        sp = self.partition
        head = (f"S {sp.start_offset} {sp.end_offset} {sp.next_fetch_offset()} "
                f"{sp.delivery_complete_count} |")
        ranges = "".join(f" {f},{l},{int(st)},{c},{m}" for f, l, st, c, m in sp.record_states())
        return head + ranges

    def run(self, line: str) -> str:
        try:
            return self._run(line)
        except IllegalStateError:
            return "EXC"  # where Kafka throws (IllegalStateException / IllegalArgumentException)

    def _run(self, line: str) -> str:
        t = line.split(" ")
        op = t[0]
        if op == "config":
            lock_ms, limit, max_in_flight, dlq, renew = t[1:6]
            self.config = SharePartitionConfig(
                record_lock_duration_ms=int(lock_ms), delivery_count_limit=int(limit),
                max_in_flight_records=int(max_in_flight), auto_offset_reset="earliest",
                dlq_enabled=dlq == "1", renew_acknowledge_enable=renew == "1")
            if self.sp is not None:
                self.sp.config = self.config  # a group config changed (Kafka reads it per call)
            return "OK"
        if op == "init":
            start, epoch, n = int(t[1]), int(t[2]), int(t[3])
            batches = []
            for token in t[4:4 + n]:
                f, l, st, c = (int(x) for x in token.split(","))
                batches.append(StateBatch(f, l, st, c))
            self.sp = SharePartition("g", "t", uuid.UUID(int=7), 0, self.config, leader_epoch=0)
            self.sp.initialize(ShareState(epoch, start, tuple(batches)), log_start_offset=0,
                               log_end_offset=0)
            return self.dump()
        sp = self.partition
        if op == "acq":
            now_ms, member, mode, batch_size, max_records, fetch_offset, isolation = t[1:8]
            nb = int(t[8])
            batches = []
            for token in t[9:9 + nb]:
                base, last, pid, txn, ctrl, abort = (int(x) for x in token.split(","))
                batches.append(FetchedBatch(base, last, pid, txn == 1, ctrl == 1, abort == 1))
            na = int(t[9 + nb])
            aborted = [tuple(int(x) for x in token.split(","))
                       for token in t[10 + nb:10 + nb + na]]
            got = sp.acquire(member, batches, max_records=int(max_records), now_ms=int(now_ms),
                             aborted_producer_ranges=aborted, batch_size=int(batch_size),
                             acquire_mode=ShareAcquireMode(int(mode)),
                             fetch_offset=int(fetch_offset),
                             isolation_level="read_committed" if isolation == "1"
                             else "read_uncommitted")
            count = sum(r.last_offset - r.first_offset + 1 for r in got)
            return f"A {count}" + "".join(f" {r.first_offset},{r.last_offset},{r.delivery_count}"
                                          for r in got)
        if op == "ack":
            now_ms, member, nb = int(t[1]), t[2], int(t[3])
            acks = []
            for token in t[4:4 + nb]:
                values = [int(x) for x in token.split(",")]
                acks.append(AckBatch(values[0], values[1], tuple(values[2:])))
            error = sp.acknowledge(member, acks, now_ms=now_ms)
            # Where Kafka throws NullPointerException out of acknowledge (the request fails
            # with UNKNOWN_SERVER_ERROR), seglog answers that code.
            return "EXC" if error == codes.UNKNOWN_SERVER_ERROR else f"E {error}"
        if op == "rel":
            return f"E {sp.release_acquired_records(t[2], now_ms=int(t[1]))}"
        if op == "exp":
            return "X " + ("true" if sp.expire_locks(int(t[1])) else "false")
        if op == "wd":
            state = sp.pending_write()
            if state is None:
                return "W none"
            desc = (f"W {state.state_epoch} {state.start_offset} "
                    f"{state.delivery_complete_count} {state.leader_epoch}"
                    + "".join(f" {b.first_offset},{b.last_offset},{b.delivery_state},"
                              f"{b.delivery_count}" for b in state.batches))
            sp.write_done(t[1] == "1")
            return desc
        if op == "dlq":
            batches = sp.take_dlq_batches()
            return "D" + "".join(f" {b.first_offset},{b.last_offset},{b.delivery_count},{b.cause}"
                                 for b in batches)
        if op == "ad":
            sp.archiving_done(int(t[1]), int(t[2]))
            return "OK"
        if op == "lso":
            sp.update_log_start_offset(int(t[1]))
            return "OK"
        if op == "dump":
            return self.dump()
        raise AssertionError(line)


def make_log(rng: random.Random, log_end: int) -> tuple[list[FetchedBatch], list[tuple[int, int]]]:
    """Record batches up to ``log_end``: plain, idempotent, transactional (some aborted, with
    their markers), and holes left by compaction."""
    batches: list[FetchedBatch] = []
    aborted: list[tuple[int, int]] = []
    offset = 0
    pid = 1000
    while offset < log_end - 1:
        size = rng.randint(1, 8)
        last = min(offset + size, log_end - 1) - 1
        kind = rng.random()
        if kind < 0.15:
            pid += 1
            batches.append(FetchedBatch(offset, last, pid, True))
            abort = rng.random() < 0.6
            if abort:
                aborted.append((pid, offset))
            batches.append(FetchedBatch(last + 1, last + 1, pid, True, True, abort))
            last += 1
        elif kind < 0.22:
            pass  # a hole: compacted away
        elif kind < 0.3:
            batches.append(FetchedBatch(offset, last, rng.randint(1, 50)))
        else:
            batches.append(FetchedBatch(offset, last))
        offset = last + 1
    return batches, aborted


def script(seed: int, steps: int) -> list[str]:
    """A random script, generated against seglog's port (the acknowledgements it makes are
    mostly of records the port says a member holds; the log reads start where it says)."""
    rng = random.Random(seed)
    log_end = rng.choice([60, 150, 300])
    log_batches, aborted = make_log(rng, log_end)
    lines: list[str] = []
    driver = Driver()

    def do(line: str) -> str:
        lines.append(line)
        return driver.run(line)

    config = (f"config {rng.choice([50, 200, 1000])} {rng.choice([2, 3, 4, 5, 6])} "
              f"{rng.choice([20, 100, 1000])} {int(rng.random() < 0.5)} "
              f"{int(rng.random() < 0.8)}")
    do(config)
    # Sometimes start from a persisted state with gaps.
    if rng.random() < 0.4:
        start = rng.randint(0, 10)
        state_batches = []
        offset = start
        while offset < start + 40 and offset < log_end - 5:
            offset += rng.randint(0, 4)
            last = offset + rng.randint(0, 5)
            # Never ACQUIRED: Kafka does not write it (and seglog loads it AVAILABLE).
            st = rng.choice([0, 0, 2, 3, 4])
            count = rng.randint(0, 3) if st == 0 else rng.randint(1, 3)
            state_batches.append(f"{offset},{last},{st},{count}")
            offset = last + 1
        do(f"init {start} 1 {len(state_batches)} " + " ".join(state_batches))
    else:
        do("init -1 0 0")
    members = ["m1", "m2", "m3"]
    now_ms = 0
    isolation = int(rng.random() < 0.5)
    log_start = 0
    for _ in range(steps):
        sp = driver.partition
        now_ms += rng.choice([0, 0, 1, 5, 20, 60])
        member = rng.choice(members)
        action = rng.random()
        if action < 0.35:
            fetch_offset = sp.next_fetch_offset()
            read = [b for b in log_batches if b.last_offset >= fetch_offset][:rng.randint(1, 12)]
            if not read:
                continue
            tokens = " ".join(f"{b.base_offset},{b.last_offset},{b.producer_id},"
                              f"{int(b.is_transactional)},{int(b.is_control)},"
                              f"{int(b.is_abort_marker)}" for b in read)
            aborts = [a for a in aborted if read[0].base_offset <= a[1] <= read[-1].last_offset]
            do(f"acq {now_ms} {member} {int(rng.random() < 0.3)} {rng.choice([1, 3, 10, 500])} "
               f"{rng.choice([1, 2, 5, 13, 40, 500])} {fetch_offset} {isolation} {len(read)} "
               f"{tokens} {len(aborts)}" + "".join(f" {p},{f}" for p, f in aborts))
        elif action < 0.65:
            held = [(f, l) for f, l, st, _c, m in sp.record_states()
                    if st == RecordState.ACQUIRED and m == member]
            if held and rng.random() < 0.9:
                first, last = rng.choice(held)
                while rng.random() < 0.5:
                    nxt = [h for h in held if h[0] == last + 1]
                    if not nxt:
                        break
                    last = nxt[0][1]
                if rng.random() < 0.3 and last > first:
                    first = rng.randint(first, last)
                types = [rng.choice([0, 1, 1, 1, 2, 2, 3, 4])]
                if rng.random() < 0.3:
                    types = [rng.choice([0, 1, 2, 3, 4]) for _ in range(last - first + 1)]
                batch = f"{first},{last}," + ",".join(str(x) for x in types)
                others = [h for h in held if h[0] > last]
                if others and rng.random() < 0.25:
                    # A second range in the same request (all or nothing).
                    f2, l2 = rng.choice(others)
                    batch = f"2 {batch} {f2},{l2},{rng.choice([1, 2, 3])}"
                else:
                    batch = f"1 {batch}"
            else:
                first = rng.randint(0, log_end)
                last = first + rng.randint(0, 6)
                batch = f"1 {first},{last},{rng.choice([1, 2, 3])}"
            do(f"ack {now_ms} {member} {batch}")
        elif action < 0.7:
            do(f"rel {now_ms} {member}")
        elif action < 0.8:
            do(f"exp {now_ms}")
        elif action < 0.95:
            do(f"wd {int(rng.random() < 0.85)}")
        elif action < 0.98:
            new_start = min(log_end, log_start + rng.randint(1, 8))
            if new_start > log_start:
                log_start = new_start
                do(f"lso {log_start}")
        elif action < 0.99:
            # A group config change: lock duration, delivery limit, record locks, renew.
            dlq_flag = config.split(" ")[4]
            do(f"config {rng.choice([50, 200, 1000])} {rng.choice([2, 3, 4, 5, 6])} "
               f"{rng.choice([20, 100, 1000])} {dlq_flag} {int(rng.random() < 0.8)}")
        else:
            do(f"exp {now_ms + 10_000}")
            now_ms += 10_000
        if rng.random() < 0.2:
            answer = do("dlq")
            for token in answer.split(" ")[1:]:
                f, l = token.split(",")[:2]
                do(f"ad {f} {l}")
        do("dump")
    return lines


@pytest.mark.parametrize("chunk", range(4))
def test_random_scripts_answer_as_kafka_4_4(reference: tuple[str, str], chunk: int):
    lines: list[str] = []
    for seed in range(chunk * 25, chunk * 25 + 25):
        lines.extend(script(seed, 150))
    expected = run_kafka(reference, lines)
    driver = Driver()
    for index, line in enumerate(lines):
        ours = driver.run(line)
        theirs = expected[index] if index < len(expected) else "<nothing>"
        if ours != theirs:
            context = "\n".join(lines[max(0, index - 15):index + 1])
            pytest.fail(f"line {index}: {line}\nseglog: {ours}\nkafka:  {theirs}\n"
                        f"script before it:\n{context}")
