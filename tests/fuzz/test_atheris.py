"""A brief run of the coverage-guided atheris harness (``fuzz/fuzz_codec.py``) on the native
parser, differential against the pure twin. Skipped when atheris is not installed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(ROOT, "fuzz", "fuzz_codec.py")


def _run(tmp_path, runs: int, seed: int, timeout_s: int) -> None:
    pytest.importorskip("atheris", reason="atheris not installed (pip install atheris)")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    env = dict(os.environ, SEGLOG_FUZZ_SRC=os.path.join(ROOT, "src"))
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run(
        [sys.executable, HARNESS, f"-runs={runs}", f"-seed={seed}", "-max_len=4096",
         "-rss_limit_mb=1024", "-timeout=20", f"-artifact_prefix={tmp_path}/", str(corpus)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout_s)
    crashes = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "oom-", "timeout-")))
    assert proc.returncode == 0 and not crashes, (
        f"atheris (seed {seed}) failed with exit {proc.returncode}; inputs saved: {crashes} "
        f"in {tmp_path}; replay: python3 fuzz/fuzz_codec.py <file>\n{proc.stderr[-4000:]}")


@pytest.mark.fuzz
def test_atheris_codec_short(tmp_path, fuzz_seed):
    _run(tmp_path, runs=4000, seed=fuzz_seed + 1, timeout_s=120)


@pytest.mark.fuzz_long
def test_atheris_codec_long(tmp_path, fuzz_seed):
    _run(tmp_path, runs=100_000, seed=fuzz_seed + 1, timeout_s=600)
