"""Client batches into ``Log.append_raw`` on both backends: valid batches from the codec,
mutated (as the parser inputs are, CRC fixed or not), and compression bombs of every codec.

Invariants: typed errors only; the twins accept and refuse the same buffers; what is
accepted reads back as exactly what the client's bytes hold, at the offsets returned; a bomb
is refused with a typed error after bounded memory, in a worker capped at 1 GiB of address
space, and within a time limit.
"""

from __future__ import annotations

import random

import pytest

from . import bombs, checks, corpus, inputs, mutate
from .workers import Worker

#: Peak resident memory a worker may reach while refusing a bomb (the decoders' own limit is
#: 64 MiB of output, zstd may add a 128 MiB window).
BOMB_RSS_MAX_KIB = 512 * 1024


def client_seeds() -> list[tuple[str, bytes]]:
    """Batches as a producer sends them: base offset 0, every codec, several back to back."""
    import seglog

    pure = seglog.get_backend("pure")
    rng = random.Random(99)
    out = []
    for codec in corpus.CODECS:
        for n in (1, 4):
            values, keys, headers = corpus._record_fields(rng, n, n)
            out.append((f"{codec}-{n}", pure.encode_batch(values, keys, corpus.T0_MS, headers,
                                                          compression=codec)))
    out.append(("two", out[0][1] + out[3][1]))
    return out


def append_input(seed: int, index: int, seeds) -> tuple[bytes, str]:
    rng = random.Random(f"append:{seed}:{index}")
    name, raw = rng.choice(seeds)
    roll = rng.random()
    if roll < 0.1:
        return raw, f"{name}: as is"
    data, how = mutate.mutate(rng, raw, corpus.batch_fields(raw))
    if roll < 0.5:
        return inputs.fix_crc(data), f"{name}: {how} +crc"
    return data, f"{name}: {how}"


def _norm(result):
    return result[:3] if result[0] == "ok" else ("err", result[1])


def run_append_campaign(tmp_path, seed: int, total: int, chunk: int = 100) -> checks.FindingLog:
    seeds = client_seeds()
    log = checks.FindingLog()
    workers = {"native": Worker(), "pure": Worker()}
    try:
        for start in range(0, total, chunk):
            cases = [append_input(seed, i, seeds) for i in range(start, min(total, start + chunk))]
            buffers = [data for data, _how in cases]
            results = {}
            for name, worker in workers.items():
                reply = worker.call("append", {"dir": str(tmp_path / f"append-{name}"),
                                               "backend": name, "buffers": buffers},
                                    timeout_s=120)
                if reply.status == "harness-error":
                    raise RuntimeError(reply.value)
                if reply.status != "ok":
                    for i, data in enumerate(buffers):  # find the input that kills it
                        single = worker.call("append", {"dir": str(tmp_path / f"append-{name}"),
                                                        "backend": name, "buffers": [data]})
                        if single.status not in ("ok", "harness-error"):
                            path = tmp_path / f"crash-append-{seed}-{start + i}-{name}.bin"
                            path.write_bytes(data)
                            log.add(("append_raw", "crash", name, single.status, str(single.value)),
                                    {"case": start + i, "how": cases[i][1], "saved": str(path),
                                     "hex": data.hex()[:4096], "stderr": single.stderr_tail[-2000:]})
                            break
                    continue
                results[name] = reply.value
                _check_results(name, seed, start, cases, reply.value, log)
            if len(results) == 2:
                for i, (a, b) in enumerate(zip(results["native"], results["pure"])):
                    if _norm(a) != _norm(b):
                        log.add(("append_raw", "twins-differ", a[0] if a[0] == "ok" else a[1],
                                 b[0] if b[0] == "ok" else b[1]),
                                {"seed": seed, "case": start + i, "how": cases[i][1],
                                 "hex": cases[i][0].hex()[:2048],
                                 "native": checks._brief(a), "pure": checks._brief(b)})
    finally:
        for worker in workers.values():
            worker.close()
    return log


def _check_results(name, seed, start, cases, results, log) -> None:
    seen_ranges = set()
    for i, result in enumerate(results):
        example = {"seed": seed, "case": start + i, "how": cases[i][1],
                   "hex": cases[i][0].hex()[:2048]}
        if result[0] == "err":
            if not result[2]:
                log.add(("append_raw", "untyped", name, result[1]), {**example, "error": result[3]})
            continue
        _ok, (first, last), back, client = result
        if (first, last) in seen_ranges:
            continue  # an idempotent duplicate answers with the original offsets
        seen_ranges.add((first, last))
        if back[0] != "ok":
            log.add(("append_raw", "accepted-then-unreadable", name, back[1]),
                    {**example, "error": back[3]})
        elif client[0] != "ok":
            log.add(("append_raw", "accepted-undecodable-client-bytes", name, client[1]),
                    {**example, "error": client[3]})
        else:
            stored = [r[1:] for r in back[1]]
            offsets = [r[0] for r in back[1]]
            if stored != list(client[1]) or offsets != list(range(first, first + len(offsets))):
                log.add(("append_raw", "stored-differs-from-sent", name),
                        {**example, "stored": checks._brief(back), "sent": checks._brief(client)})


@pytest.mark.fuzz
def test_append_raw_short(tmp_path, fuzz_seed):
    log = run_append_campaign(tmp_path, fuzz_seed, total=600)
    assert not log, f"append_raw fuzz (seed {fuzz_seed}) found:\n{log.summary()}"


@pytest.mark.fuzz_long
def test_append_raw_long(tmp_path, fuzz_seed):
    log = run_append_campaign(tmp_path, fuzz_seed + 31, total=40_000, chunk=500)
    assert not log, f"append_raw fuzz (seed {fuzz_seed + 31}) found:\n{log.summary()}"


@pytest.mark.fuzz
@pytest.mark.parametrize("backend_name", ["native", "pure"])
def test_compression_bombs(tmp_path, backend_name):
    failures = []
    with Worker() as worker:
        for name, data in bombs.all_bombs():
            reply = worker.call("bomb", {"backend": backend_name, "data": data,
                                         "dir": str(tmp_path / "bomb-log")}, timeout_s=60)
            if reply.status != "ok":
                path = tmp_path / f"bomb-{name}.bin"
                path.write_bytes(data)
                failures.append(f"{name}: {reply.status} {reply.value} (saved {path})\n"
                                f"{reply.stderr_tail[-1500:]}")
                continue
            out = reply.value
            for op, outcome in out.items():
                if op.endswith("_kib"):
                    continue
                if outcome[0] == "ok":
                    failures.append(f"{name}: {op} accepted a bomb: {outcome[1]!r}")
                elif not outcome[2]:
                    failures.append(f"{name}: {op} raised untyped {outcome[1]}: {outcome[3]}")
            rss = out["peak_rss_kib"]
            if rss > BOMB_RSS_MAX_KIB:
                failures.append(f"{name}: peak RSS {rss // 1024} MiB > {BOMB_RSS_MAX_KIB // 1024} MiB")
    assert not failures, "\n".join(failures)
