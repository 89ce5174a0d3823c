"""Parser inputs on both backends: iter_batches, Batch.records/columns/record_at/is_valid,
decode_columns, on mutated batches (see :mod:`fuzz.inputs`), with the native backend in
worker processes. Short: 4,000 inputs (a few seconds); long: 960,000."""

from __future__ import annotations

import pytest

from .campaign import run_codec_campaign


def _run(tmp_path, seed, total, workers, chunk, **kwargs):
    log, ran = run_codec_campaign(seed=seed, total=total, chunk=chunk, workers=workers,
                                  out_dir=str(tmp_path), **kwargs)
    print(f"codec fuzz: seed {seed}, {ran} inputs")
    assert not log, (f"codec fuzz (seed {seed}, {ran} inputs; replay an input: "
                     f"PYTHONPATH=src:tests python3 -m fuzz.replay codec {seed} <index>, the "
                     f"index is the second number of 'ref') found:\n{log.summary()}")
    return ran


@pytest.mark.fuzz
def test_codec_short(tmp_path, fuzz_seed):
    _run(tmp_path, fuzz_seed, total=4000, workers=1, chunk=1000)


@pytest.mark.fuzz_long
def test_codec_long(tmp_path, fuzz_seed):
    # 960,000 inputs, each on both backends (about 2,000 inputs/s with two workers here, so
    # ~8 min); with the 40,000 client batches of test_append_raw_long (and the 100,000 of
    # test_atheris_codec_long when atheris is installed) the long mode feeds the parsers
    # 10^6 inputs or more.
    ran = _run(tmp_path, fuzz_seed + 1_000_003, total=960_000, workers=2, chunk=5000)
    assert ran == 960_000
