"""A read-only follower reading while its segment file is truncated under it (the writer's
recovery or ``truncate_to`` in another process), on both backends in worker processes.

Invariants: no crash (a SIGBUS from a mapping past the end of the file kills the worker and
fails the test with the case), typed errors only, and every record handed out was written.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest

from .workers import Worker


def _records_ok(outcome, model):
    if outcome[0] != "ok":
        return outcome[2]  # a typed error is fine
    return all(model["records"].get(r[0]) == r for r in outcome[1])


def run_follower_campaign(tmp_path, seed, seed_logs, count):
    failures = []
    path, model = seed_logs["clean"]
    segments = sorted(n for n in os.listdir(path) if n.endswith(".log"))
    with Worker() as native, Worker() as pure:
        workers = {"native": native, "pure": pure}
        for i in range(count):
            rng = random.Random(f"follower:{seed}:{i}")
            name = rng.choice(segments)
            size = os.path.getsize(os.path.join(path, name))
            length = rng.choice((0, rng.randrange(size + 1), size - 1, size // 2))
            for backend, worker in workers.items():
                case_dir = str(tmp_path / f"case-{backend}")
                shutil.rmtree(case_dir, ignore_errors=True)
                shutil.copytree(path, case_dir)
                payload = {"dir": case_dir, "backend": backend, "path": os.path.join(case_dir, name),
                           "length": length, "before": rng.randrange(1, 20),
                           "held_offset": rng.randrange(model["end"])}
                reply = worker.call("truncate_under_reader", payload, timeout_s=60)
                what = f"case {i} (seed {seed}): {backend}, {name} cut to {length}/{size}"
                if reply.status != "ok":
                    failures.append(f"{what}: {reply.status} {reply.value}\n{reply.stderr_tail[-1200:]}")
                    continue
                for op, outcome in reply.value.items():
                    if outcome[0] == "err" and not outcome[2]:
                        failures.append(f"{what}: {op} raised untyped {outcome[1]}: {outcome[3]}")
                for op in ("first", "rest", "after_refresh"):
                    if not _records_ok(reply.value[op], model):
                        failures.append(f"{what}: {op} returned records that were not written")
    return failures


@pytest.mark.fuzz
def test_follower_truncated_under_it_short(tmp_path, fuzz_seed, seed_logs):
    failures = run_follower_campaign(tmp_path, fuzz_seed, seed_logs, count=12)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.fuzz_long
def test_follower_truncated_under_it_long(tmp_path, fuzz_seed, seed_logs):
    failures = run_follower_campaign(tmp_path, fuzz_seed + 5, seed_logs, count=200)
    assert not failures, "\n".join(failures[:20])
