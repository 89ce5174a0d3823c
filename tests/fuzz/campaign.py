"""Running many cases through worker processes: parser-input campaigns and file campaigns.

A campaign never stops at the first finding: it runs to its budget, groups findings by
signature (:class:`fuzz.checks.FindingLog`) and the test fails at the end with every distinct
one, its count, the seed and a reproducer. A worker death is a finding too: the chunk that
died is replayed one input at a time in a fresh worker to name the input, which is saved
under the test's tmp dir.
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time

from . import checks, corpus, inputs, mutate
from .workers import Worker

# --- parser inputs -------------------------------------------------------------------------


def _crash_finding(log, what, reply, *, saved: str, how: str = "", hexdata: str = ""):
    log.add(("crash", what, reply.status, str(reply.value)),
            {"saved": saved, "how": how, "hex": hexdata[:4096],
             "stderr": reply.stderr_tail[-2500:]})


def run_codec_campaign(*, seed: int, total: int, chunk: int, workers: int, out_dir: str,
                       ops: str = "full", deadline_s: float | None = None) -> tuple[checks.FindingLog, int]:
    """Feed ``total`` generated inputs of run ``seed`` to both backends in ``workers``
    processes; returns the findings and how many inputs ran (fewer if ``deadline_s`` hit)."""
    log = checks.FindingLog()
    todo = [(s, min(chunk, total - s)) for s in range(0, total, chunk)]
    lock = threading.Lock()
    done = [0]
    start_time = time.monotonic()

    def one_worker():
        with Worker() as worker:
            while True:
                with lock:
                    if not todo:
                        return
                    if deadline_s is not None and time.monotonic() - start_time > deadline_s:
                        return
                    start, count = todo.pop(0)
                reply = worker.call("codec", {"seed": seed, "start": start, "count": count,
                                              "ops": ops}, timeout_s=60 + 0.05 * count)
                if reply.status == "ok":
                    with lock:
                        log.merge(reply.value)
                        done[0] += reply.value["inputs"]
                    continue
                if reply.status == "harness-error":
                    raise RuntimeError(f"harness error in codec chunk {start}+{count}:\n{reply.value}")
                # A death: find the input, one at a time.
                for index in range(start, start + count):
                    single = worker.call("codec", {"seed": seed, "start": index, "count": 1,
                                                   "ops": ops}, timeout_s=30)
                    if single.status == "ok":
                        with lock:
                            log.merge(single.value)
                            done[0] += 1
                        continue
                    case = inputs.codec_input(seed, index)
                    path = os.path.join(out_dir, f"crash-codec-{seed}-{index}.bin")
                    with open(path, "wb") as f:
                        f.write(case.data)
                    with lock:
                        _crash_finding(log, "codec", single, saved=path, how=case.how,
                                       hexdata=case.data.hex())
                        done[0] += 1

    threads = [threading.Thread(target=one_worker) for _ in range(workers)]
    errors = []

    def guarded(target):
        try:
            target()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(one_worker,)) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return log, done[0]


# --- files -------------------------------------------------------------------------------------

TEXT_KINDS = {"recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
              "replication-offset-checkpoint", "cleaner-offset-checkpoint", "meta.properties",
              "partition.metadata"}
JSON_KINDS = {"seglog-topics.json"}


def log_file_kinds(path: str) -> dict[str, list[str]]:
    """Files of a standalone log directory by kind (suffix, or checkpoint name)."""
    kinds: dict[str, list[str]] = {}
    for name in sorted(os.listdir(path)):
        for suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot"):
            if name.endswith(suffix) and name[:20].isdigit():
                kinds.setdefault(suffix, []).append(name)
        if name in TEXT_KINDS:
            kinds.setdefault(name, []).append(name)
    return kinds


def mutate_file(rng: random.Random, kind: str, data: bytes) -> tuple[bytes, str]:
    if kind in JSON_KINDS:
        return mutate.mutate_json(rng, data)
    if kind in TEXT_KINDS:
        return mutate.mutate_text(rng, data)
    suffix = kind if kind.startswith(".") else ".log"
    return mutate.mutate(rng, data, corpus.file_fields(suffix, data))


class FileCampaign:
    """Mutate one file of a seed directory per case, run it on both backends, check it."""

    def __init__(self, *, out_dir: str, workers: int = 1):
        self.out_dir = out_dir
        self.log = checks.FindingLog()
        self.cases = 0
        self.worker_count = workers
        self.outcomes: dict[tuple, int] = {}  # (file kind, backend, "ok" | step:error) -> n

    def _prepare(self, seed_dir: str, rel: str, data: bytes, case_dir: str) -> None:
        shutil.rmtree(case_dir, ignore_errors=True)
        shutil.copytree(seed_dir, case_dir)
        with open(os.path.join(case_dir, rel), "wb") as f:
            f.write(data)

    def run(self, *, kind_name: str, seed: int, count: int, seeds: dict, handler: str,
            kinds_of, check, comparable, payload_extra=None, deadline_s: float | None = None,
            only_cases=None) -> None:
        """``seeds``: {label: (dir, model)}. Each case picks a seed dir and a file kind (round
        robin), mutates one file of that kind and runs ``handler`` on a fresh copy per
        backend."""
        lock = threading.Lock()
        started = time.monotonic()
        plan = []
        labels = sorted(seeds)
        kinds_cache = {label: kinds_of(seeds[label][0]) for label in labels}
        for i in range(count):
            label = labels[i % len(labels)]
            kinds = sorted(kinds_cache[label])
            kind = kinds[(i // len(labels)) % len(kinds)]
            plan.append((i, label, kind))
        todo = [p for p in plan if only_cases is None or p[0] in only_cases]
        errors = []

        def loop(wid: int):
            workers = {"native": Worker(), "pure": Worker()}
            try:
                while True:
                    with lock:
                        if not todo or (deadline_s and time.monotonic() - started > deadline_s):
                            return
                        i, label, kind = todo.pop(0)
                    self._one(i, label, kind, seed, seeds, kinds_cache, handler, check,
                              comparable, payload_extra, workers, wid, lock, kind_name)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
            finally:
                for w in workers.values():
                    w.close()

        threads = [threading.Thread(target=loop, args=(w,)) for w in range(self.worker_count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def _one(self, i, label, kind, seed, seeds, kinds_cache, handler, check, comparable,
             payload_extra, workers, wid, lock, kind_name):
        seed_dir, model = seeds[label]
        rng = random.Random(f"{kind_name}:{seed}:{i}")
        rel = rng.choice(kinds_cache[label][kind])
        with open(os.path.join(seed_dir, rel), "rb") as f:
            original = f.read()
        data, how = mutate_file(rng, kind, original)
        read_only = bool(rng.random() < 0.3)
        sample = []
        if "batches" in model:  # a log: offsets to read() raw
            offsets = sorted(model["records"])
            sample = sorted(rng.sample(offsets, min(8, len(offsets))))
        example = {"seed": seed, "case": i, "dir": label, "file": rel, "mutation": how,
                   "read_only": read_only}
        observations = {}
        for name in ("native", "pure"):
            case_dir = os.path.join(self.out_dir, f"w{wid}-{name}")
            self._prepare(seed_dir, rel, data, case_dir)
            payload = {"dir": case_dir, "backend": name, "read_only": read_only,
                       "sample_offsets": sample, **(payload_extra or {})}
            reply = workers[name].call(handler, payload, timeout_s=120)
            if reply.status == "harness-error":
                raise RuntimeError(f"harness error ({example}):\n{reply.value}")
            if reply.status != "ok":
                saved = os.path.join(self.out_dir, f"crash-{kind_name}-{seed}-{i}-{name}")
                self._prepare(seed_dir, rel, data, saved)  # the mutated dir, before the run
                with lock:
                    self.log.add((kind_name, label, kind, "crash", name, reply.status,
                                  str(reply.value)),
                                 {**example, "saved": saved, "stderr": reply.stderr_tail[-2500:]})
                continue
            observations[name] = reply.value
            error = reply.value.get("error")
            with lock:
                key = (kind, name, "ok" if not error else f"{error[0]}:{error[1]}")
                self.outcomes[key] = self.outcomes.get(key, 0) + 1
            for sig, detail in check(model, reply.value, file_kind=kind):
                with lock:
                    self.log.add((kind_name, label, kind, name, *sig), {**example, "detail": detail})
        if len(observations) == 2:
            diff = checks.first_difference(comparable(observations["native"]),
                                           comparable(observations["pure"]))
            if diff:
                with lock:
                    self.log.add((kind_name, label, kind, "twins-differ", diff.split(":")[0].split("[")[0]),
                                 {**example, "diff": diff})
        with lock:
            self.cases += 1
